;; Bulk-memory and reference-type instructions (0xfc prefix: memory.init,
;; data.drop, memory.copy, memory.fill, table.init, elem.drop, table.copy,
;; table.grow, table.size, table.fill, and the saturating truncations), plus
;; table.get/set, ref.func, ref.null, ref.is_null and call_indirect on a
;; second table.
(module
  (type $ret (func (result i32)))
  (memory (export "memory") 1)
  (table $t 4 funcref)
  (table $u 2 funcref)
  (data $hello "hello, world")
  (elem $fns func $one $two $three)

  (func $one (result i32) (i32.const 1))
  (func $two (result i32) (i32.const 2))
  (func $three (result i32) (i32.const 3))

  (func (export "run") (result i32)
    (local $acc i32)
    (local $i i32)
    (memory.init $hello (i32.const 100) (i32.const 0) (i32.const 12))
    (data.drop $hello)
    (memory.copy (i32.const 200) (i32.const 100) (i32.const 12))
    (memory.fill (i32.const 300) (i32.const 0x41) (i32.const 8))
    (table.init $t $fns (i32.const 0) (i32.const 0) (i32.const 3))
    (elem.drop $fns)
    (table.copy $u $t (i32.const 0) (i32.const 1) (i32.const 2))
    (local.set $acc (table.grow $t (ref.func $three) (i32.const 2)))
    (table.fill $t (i32.const 4) (ref.null func) (i32.const 1))
    (table.set $t (i32.const 3) (table.get $u (i32.const 0)))
    (local.set $acc (i32.add (local.get $acc) (i32.mul (table.size $t) (i32.const 10))))
    (local.set $acc (i32.add (local.get $acc) (ref.is_null (table.get $t (i32.const 4)))))
    (local.set $acc (i32.add (local.get $acc) (ref.is_null (table.get $t (i32.const 5)))))
    (loop $next
      (local.set $acc
        (i32.add (local.get $acc)
          (i32.add
            (call_indirect $u (type $ret) (i32.rem_u (local.get $i) (i32.const 2)))
            (call_indirect $t (type $ret) (i32.rem_u (local.get $i) (i32.const 4))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 10))))
    (local.set $acc (i32.add (local.get $acc) (i32.load8_u (i32.const 207))))
    (local.set $acc (i32.add (local.get $acc) (i32.load8_u (i32.const 303))))
    (local.set $acc
      (i32.add (local.get $acc)
        (i32.wrap_i64 (i64.shr_u (i64.trunc_sat_f64_u (f64.const 1e300)) (i64.const 60)))))
    (i32.add (local.get $acc)
      (i32.add
        (i32.trunc_sat_f32_s (f32.const -1e30))
        (i32.trunc_sat_f32_u (f32.const nan))))))
