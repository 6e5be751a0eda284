;; Provides the imports of imports.wat when instantiated under the name "env".
(module
  (global (export "seven") i32 (i32.const 7))
  (global (export "counter") (mut i64) (i64.const 0))
  (memory (export "mem") 1)
  (table (export "tab") 1 funcref)
  (func (export "three") (result i32)
    (i32.const 3)))
