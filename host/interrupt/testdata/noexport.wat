;; A module with no export section (and no imports): its start function
;; loops to fill memory, so instrumented loop checks run at instantiation.
(module
  (memory 1)
  (global $filled (mut i32) (i32.const 0))
  (func $fill
    (local $i i32)
    (loop $next
      (i32.store8 (local.get $i) (local.get $i))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 256))))
    (global.set $filled (i32.const 1)))
  (start $fill))
