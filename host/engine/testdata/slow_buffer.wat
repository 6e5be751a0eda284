;; wasmsched_buffer spins 100 million times before it answers: slower than a
;; call's deadline in the test, well within the init deadline.
(module
  (memory (export "memory") 1)
  ;; PolicyInfo{code: SUCCESS, abi_version: 1, points: 1<<2 (filter)}
  (data (i32.const 16) "\08\01\18\01\20\04")
  ;; ptr<<32 | len of the last call's detail, 0 for none
  (global $result (mut i64) (i64.const 0))
  ;; Result{code: UNSCHEDULABLE, reasons: ["no"]}
  (data (i32.const 32) "\08\03\12\02no")
  (func (export "wasmsched_abi_version") (result i32)
    (i32.const 1))
  (func (export "wasmsched_buffer") (param $size i32) (result i32)
    (local $i i32)
    (local.set $i (i32.const 100000000))
    (block $done
      (loop $spin
        (br_if $done (i32.eqz (local.get $i)))
        (local.set $i (i32.sub (local.get $i) (i32.const 1)))
        (br $spin)))
    (i32.const 1024))
  (func (export "wasmsched_result") (result i64)
    (global.get $result))
  (func (export "wasmsched_init") (param $len i32) (result i32)
    (global.set $result (i64.const 0x0000001000000006))
    (i32.const 1))
  (func (export "wasmsched_sync") (param $len i32) (result i32)
    (i32.const 1))
  (func (export "wasmsched_cycle") (param $len i32) (result i32)
    (i32.const 1))
  ;; code<<32 | sequence number of the reasons
  (func (export "wasmsched_filter") (param $handle i32) (result i64)
    (if (i32.and (local.get $handle) (i32.const 1))
      (then
        (global.set $result (i64.const 0x0000002000000006))
        (return (i64.const 0x0000000300000001))))
    (global.set $result (i64.const 0))
    (i64.const 0x0000000100000000))
  ;; SUCCESS, with the handle as the score
  (func (export "wasmsched_score") (param $handle i32) (result i64)
    (i64.or (i64.const 0x100000000) (i64.extend_i32_u (local.get $handle))))
  (func (export "wasmsched_call") (param $point i32) (param $len i32) (result i32)
    (i32.const 1)))
