;; A guest that answers whatever the host wrote into its memory beforehand,
;; for the fuzz test of the host's decoding (fuzz_test.go): every export
;; returns the value stored at a fixed address, so the test chooses status
;; codes, result addresses and lengths, and the bytes found there.
(module
  (memory (export "memory") 2 2)
  ;; 0: wasmsched_result, 8: wasmsched_filter, 16: wasmsched_score and
  ;; wasmsched_score_nodes (i64)
  ;; 24: wasmsched_init, wasmsched_sync, wasmsched_cycle, wasmsched_call
  ;; 28: wasmsched_buffer (i32)
  (func (export "wasmsched_abi_version") (result i32)
    (i32.const 1))
  (func (export "wasmsched_buffer") (param $size i32) (result i32)
    (i32.load (i32.const 28)))
  (func (export "wasmsched_result") (result i64)
    (i64.load (i32.const 0)))
  (func (export "wasmsched_init") (param $len i32) (result i32)
    (i32.load (i32.const 24)))
  (func (export "wasmsched_sync") (param $len i32) (result i32)
    (i32.load (i32.const 24)))
  (func (export "wasmsched_cycle") (param $len i32) (result i32)
    (i32.load (i32.const 24)))
  (func (export "wasmsched_filter") (param $handle i32) (result i64)
    (i64.load (i32.const 8)))
  (func (export "wasmsched_score") (param $handle i32) (result i64)
    (i64.load (i32.const 16)))
  (func (export "wasmsched_score_nodes") (param $n i32) (result i64)
    (i64.load (i32.const 16)))
  (func (export "wasmsched_call") (param $point i32) (param $len i32) (result i32)
    (i32.load (i32.const 24))))
