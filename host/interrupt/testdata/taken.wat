;; A module that already exports the name the instrumentation needs.
(module
  (func (export "wasmsched_interrupt")))
