;; flags: --enable-threads
;; Atomic instructions (0xfe prefix) on a shared memory, in a loop: memory
;; arguments, and atomic.fence with its single byte.
(module
  (memory (export "memory") 1 1 shared)
  (func (export "count") (param $n i32) (result i64)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (drop (i32.atomic.rmw.add (i32.const 0) (i32.const 2)))
        (drop (i64.atomic.rmw.xor offset=8 (i32.const 0) (i64.extend_i32_u (local.get $i))))
        (i32.atomic.store16 (i32.const 16) (local.get $i))
        (atomic.fence)
        (drop (memory.atomic.notify (i32.const 0) (i32.const 1)))
        (drop (i32.atomic.rmw.cmpxchg (i32.const 20) (i32.const 0) (i32.const 9)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i64.add
      (i64.add
        (i64.extend_i32_u (i32.atomic.load (i32.const 0)))
        (i64.atomic.load (i32.const 8)))
      (i64.extend_i32_u
        (i32.add (i32.atomic.load16_u (i32.const 16)) (i32.atomic.load (i32.const 20)))))))
