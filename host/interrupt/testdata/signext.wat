;; Sign-extension instructions (0xc0-0xc4) in a loop.
(module
  (func (export "extend") (param $n i32) (result i64)
    (local $i i32)
    (local $acc i64)
    (loop $next
      (local.set $acc
        (i64.add (local.get $acc)
          (i64.add
            (i64.extend_i32_s
              (i32.add
                (i32.extend8_s (i32.add (local.get $i) (i32.const 120)))
                (i32.extend16_s (i32.mul (local.get $i) (i32.const 4000)))))
            (i64.add
              (i64.extend8_s (i64.extend_i32_u (local.get $i)))
              (i64.add
                (i64.extend16_s (i64.const 0x8001))
                (i64.extend32_s (i64.const 0x80000000)))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (local.get $n))))
    (local.get $acc)))
