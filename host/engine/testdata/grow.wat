;; Grows its memory as far as it can. wasmsched_score(0) grows one page at a
;; time until memory.grow returns -1 and scores the number of pages it grew;
;; wasmsched_score(1) asks for 65536 pages at once and scores what memory.grow
;; returned. The memory declares no maximum, so the host's limit is the only one
;; (grow_max.wat is the same guest with a declared maximum of 4 GiB).
(module
  (memory (export "memory") 1)
  ;; PolicyInfo{code: SUCCESS, abi_version: 1, points: 1<<2 (filter)}
  (data (i32.const 16) "\08\01\18\01\20\04")
  ;; ptr<<32 | len of the last call's detail, 0 for none
  (global $result (mut i64) (i64.const 0))
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
    (global.set $result (i64.const 0))
    (i64.const 0x0000000100000000))
  (func (export "wasmsched_score") (param $handle i32) (result i64)
    (local $grown i32)
    (if (local.get $handle)
      (then
        (return (i64.or (i64.const 0x100000000)
          (i64.extend_i32_u (memory.grow (i32.const 65536)))))))
    (block $full
      (loop $more
        (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (local.set $grown (i32.add (local.get $grown) (i32.const 1)))
        (br $more)))
    (i64.or (i64.const 0x100000000) (i64.extend_i32_u (local.get $grown))))
  (func (export "wasmsched_call") (param $point i32) (param $len i32) (result i32)
    (i32.const 1)))
