;; Exports that run for as long as they are let: "loop" spins in a loop,
;; "recurse" computes a naive Fibonacci number (no loops, only calls; fib(90)
;; takes longer than anyone waits). "answer" returns at once.
(module
  (func (export "loop")
    (loop $again
      (br $again)))

  (func $fib (export "recurse") (param $n i64) (result i64)
    (if (result i64) (i64.lt_u (local.get $n) (i64.const 2))
      (then (local.get $n))
      (else
        (i64.add
          (call $fib (i64.sub (local.get $n) (i64.const 1)))
          (call $fib (i64.sub (local.get $n) (i64.const 2)))))))

  (func (export "answer") (result i32)
    (i32.const 42)))
