;; wasmsched_filter recurses as an LLVM-built guest (TinyGo) does: each call
;; moves the stack pointer (global 0) down 64 bytes and stores there, until
;; it wraps below address 0 and the store traps out of bounds. The host
;; reports a stack overflow, not an out-of-bounds access.
(module
  ;; the stack pointer, as LLVM keeps it: first global, stack first in memory
  (global $sp (mut i32) (i32.const 65536))
  (memory (export "memory") 2)
  ;; PolicyInfo{code: SUCCESS, abi_version: 1, points: 1<<2 (filter)}
  (data (i32.const 16) "\08\01\18\01\20\04")
  ;; ptr<<32 | len of the last call's detail, 0 for none
  (global $result (mut i64) (i64.const 0))
  ;; Result{code: UNSCHEDULABLE, reasons: ["no"]}
  (data (i32.const 32) "\08\03\12\02no")
  (func (export "wasmsched_abi_version") (result i32)
    (i32.const 1))
  (func (export "wasmsched_buffer") (param $size i32) (result i32)
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
  (func $down (param i32) (result i32)
    (global.set $sp (i32.sub (global.get $sp) (i32.const 64)))
    (i32.store (global.get $sp) (local.get 0))
    (call $down (i32.add (local.get 0) (i32.const 1))))
  (func (export "wasmsched_filter") (param $handle i32) (result i64)
    (drop (call $down (i32.const 0)))
    (i64.const 0x0000000100000000))
  ;; SUCCESS, with the handle as the score
  (func (export "wasmsched_score") (param $handle i32) (result i64)
    (i64.or (i64.const 0x100000000) (i64.extend_i32_u (local.get $handle))))
  (func (export "wasmsched_call") (param $point i32) (param $len i32) (result i32)
    (i32.const 1)))
