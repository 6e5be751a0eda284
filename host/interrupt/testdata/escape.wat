;; flags: --no-check
;; Invalid on purpose: a loop that names global 0 and type 1, which do not
;; exist here but would be the instrumentation's budget global and yield
;; type if Instrument appended them without checking. Instrument must refuse
;; it (wazero refuses the original too).
(module
  (type (func))
  (func (export "run") (type 0)
    (loop $l
      i32.const 10000
      global.set 0
      br $l)))
