;; wasmsched_filter(h) floods the host through one of its imports, forever:
;; h = 0: fd_write to stderr of a million iovecs, each of the whole first
;; 64 MiB; 1: the same to stdout; 2: random_get of 64 MiB; 3: poll_oneoff
;; with a million clock subscriptions; 4: wasmsched.log of 4 KiB lines.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (import "wasmsched" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1200)
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
  (func (export "wasmsched_filter") (param $handle i32) (result i64)
    (local $i i32)
    ;; a million iovecs {0, 64 MiB} from 64 MiB on
    (loop $fill
      (i32.store (i32.add (i32.const 0x4000000) (i32.shl (local.get $i) (i32.const 3))) (i32.const 0))
      (i32.store (i32.add (i32.const 0x4000004) (i32.shl (local.get $i) (i32.const 3))) (i32.const 0x4000000))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $fill (i32.lt_u (local.get $i) (i32.const 1000000))))
    (loop $forever
      (if (i32.eqz (local.get $handle))
        (then (drop (call $fd_write (i32.const 2) (i32.const 0x4000000) (i32.const 1000000) (i32.const 8)))))
      (if (i32.eq (local.get $handle) (i32.const 1))
        (then (drop (call $fd_write (i32.const 1) (i32.const 0x4000000) (i32.const 1000000) (i32.const 8)))))
      (if (i32.eq (local.get $handle) (i32.const 2))
        (then (drop (call $random_get (i32.const 0) (i32.const 0x4000000)))))
      (if (i32.eq (local.get $handle) (i32.const 3))
        (then (drop (call $poll_oneoff (i32.const 0) (i32.const 0x3000000) (i32.const 1000000) (i32.const 8)))))
      (if (i32.eq (local.get $handle) (i32.const 4))
        (then (call $log (i32.const 0) (i32.const 0) (i32.const 4096))))
      (br $forever))
    (i64.const 0x0000000100000000))
  ;; SUCCESS, with the handle as the score
  (func (export "wasmsched_score") (param $handle i32) (result i64)
    (i64.or (i64.const 0x100000000) (i64.extend_i32_u (local.get $handle))))
  (func (export "wasmsched_call") (param $point i32) (param $len i32) (result i32)
    (i32.const 1)))
