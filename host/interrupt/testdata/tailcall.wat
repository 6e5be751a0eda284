;; flags: --enable-tail-call
;; Tail calls: return_call and return_call_indirect. "countdown" recurses n
;; times in constant stack; "forever" tail-calls itself without end and can
;; only be stopped by the check at function entry.
(module
  (type $step (func (param i64 i64) (result i64)))
  (table 1 funcref)
  (elem (i32.const 0) $down)

  (func $down (type $step) (param $n i64) (param $acc i64) (result i64)
    (if (result i64) (i64.eqz (local.get $n))
      (then (local.get $acc))
      (else
        (return_call_indirect (type $step)
          (i64.sub (local.get $n) (i64.const 1))
          (i64.add (local.get $acc) (local.get $n))
          (i32.const 0)))))

  (func (export "countdown") (param $n i64) (result i64)
    (return_call $down (local.get $n) (i64.const 0)))

  (func $forever (export "forever") (param $n i64) (result i64)
    (return_call $forever (i64.add (local.get $n) (i64.const 1)))))
