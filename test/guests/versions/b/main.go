// Command b is version "b" of the hot-reload test policy.
package main

import "github.com/wasmsched/wasmsched/test/guests/versions"

func init() { versions.Register("b") }

func main() {}
