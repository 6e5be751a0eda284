;; Exports that compute with loops and recursion, to compare results before
;; and after instrumentation. The module has no global section.
(module
  ;; sum of 1..n, in a loop.
  (func (export "sum") (param $n i32) (result i64)
    (local $i i32)
    (local $acc i64)
    (local.set $i (i32.const 1))
    (block $done
      (loop $next
        (br_if $done (i32.gt_u (local.get $i) (local.get $n)))
        (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $acc))

  ;; n!, by recursion.
  (func $fact (export "fact") (param $n i64) (result i64)
    (if (result i64) (i64.le_u (local.get $n) (i64.const 1))
      (then (i64.const 1))
      (else
        (i64.mul (local.get $n)
          (call $fact (i64.sub (local.get $n) (i64.const 1)))))))

  ;; The number of primes below n, by trial division: nested loops.
  (func (export "primes") (param $n i32) (result i32)
    (local $i i32)
    (local $d i32)
    (local $count i32)
    (local.set $i (i32.const 2))
    (block $done
      (loop $candidate
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $d (i32.const 2))
        (block $composite
          (block $prime
            (loop $divisor
              (br_if $prime (i32.gt_u (i32.mul (local.get $d) (local.get $d)) (local.get $i)))
              (br_if $composite (i32.eqz (i32.rem_u (local.get $i) (local.get $d))))
              (local.set $d (i32.add (local.get $d) (i32.const 1)))
              (br $divisor)))
          (local.set $count (i32.add (local.get $count) (i32.const 1))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $candidate)))
    (local.get $count))

  ;; Steps of the Collatz sequence from n down to 1, with do-while loop and
  ;; if/else inside.
  (func (export "collatz") (param $n i64) (result i32)
    (local $steps i32)
    (if (i64.le_u (local.get $n) (i64.const 1))
      (then (return (i32.const 0))))
    (loop $step
      (if (i64.eqz (i64.and (local.get $n) (i64.const 1)))
        (then (local.set $n (i64.shr_u (local.get $n) (i64.const 1))))
        (else (local.set $n (i64.add (i64.mul (local.get $n) (i64.const 3)) (i64.const 1)))))
      (local.set $steps (i32.add (local.get $steps) (i32.const 1)))
      (br_if $step (i64.ne (local.get $n) (i64.const 1))))
    (local.get $steps)))
