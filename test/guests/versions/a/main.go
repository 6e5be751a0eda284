// Command a is version "a" of the hot-reload test policy.
package main

import "github.com/wasmsched/wasmsched/test/guests/versions"

func init() { versions.Register("a") }

func main() {}
