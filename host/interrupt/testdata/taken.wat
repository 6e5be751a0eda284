;; A module that already imports the name the instrumentation adds.
(module
  (import "wasmsched" "yield" (func (result i32))))
