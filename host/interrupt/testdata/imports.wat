;; A module that imports two globals (and a function, a memory and a table,
;; whose import entries the instrumentation must skip correctly), so the
;; budget global the instrumentation adds must get index 2 imported + 1
;; defined = 3 (and the stack global 4). Pointing at $seven (immutable) or
;; $counter (i64) the module would not validate; at $own, "read" would no
;; longer return 15.
(module
  (import "env" "three" (func $three (result i32)))
  (import "env" "seven" (global $seven i32))
  (import "env" "mem" (memory 1))
  (import "env" "tab" (table 1 funcref))
  (import "env" "counter" (global $counter (mut i64)))
  (global $own (mut i32) (i32.const 5))

  ;; seven + own + three + the first byte of memory = 15
  (func (export "read") (result i32)
    (i32.add
      (i32.add (global.get $seven) (global.get $own))
      (i32.add (call $three) (i32.load8_u (i32.const 0)))))

  ;; Counts in the imported global forever.
  (func (export "spin")
    (loop $again
      (global.set $counter (i64.add (global.get $counter) (i64.const 1)))
      (br $again))))
