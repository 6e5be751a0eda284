;; SIMD (0xfd prefix) instructions with every kind of immediate: memory
;; arguments, 16-byte constants and shuffles, lane indices, and memory
;; argument plus lane; used inside a loop.
(module
  (memory (export "memory") 1)
  (data (i32.const 0) "\01\02\03\04\05\06\07\08\09\0a\0b\0c\0d\0e\0f\10")

  (func (export "mix") (param $n i32) (result i32)
    (local $i i32)
    (local $acc v128)
    (local $v v128)
    (local.set $acc (v128.const i32x4 0 0 0 0))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $v (v128.load (i32.const 0)))
        (local.set $v
          (i8x16.shuffle 15 14 13 12 11 10 9 8 7 6 5 4 3 2 1 0
            (local.get $v) (local.get $v)))
        (local.set $v (i8x16.swizzle (local.get $v) (v128.const i8x16 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)))
        (local.set $v (i8x16.replace_lane 3 (local.get $v) (local.get $i)))
        (local.set $v (v128.load8_lane 5 (i32.const 7) (local.get $v)))
        (v128.store32_lane 1 (i32.const 32) (local.get $v))
        (local.set $acc
          (i32x4.add (local.get $acc)
            (i32x4.extend_low_i16x8_u (i16x8.extend_low_i8x16_u (local.get $v)))))
        (local.set $acc
          (i32x4.add (local.get $acc) (i32x4.dot_i16x8_s (v128.load8x8_u (i32.const 8)) (i16x8.splat (i32.const 2)))))
        (local.set $acc (i32x4.add (local.get $acc) (v128.load32_zero (i32.const 32))))
        (local.set $acc
          (i32x4.add (local.get $acc)
            (i32x4.trunc_sat_f32x4_s (f32x4.mul (f32x4.splat (f32.const 1.5)) (f32x4.convert_i32x4_s (i32x4.splat (local.get $i)))))))
        (local.set $acc
          (i32x4.add (local.get $acc)
            (i32x4.trunc_sat_f64x2_u_zero (f64x2.promote_low_f32x4 (f32x4.splat (f32.const 2.5))))))
        (local.set $acc (v128.bitselect (local.get $acc) (v128.load64_splat (i32.const 0)) (v128.const i64x2 -1 0)))
        (v128.store (i32.const 48) (local.get $acc))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.add
      (i32.add
        (i32x4.extract_lane 0 (local.get $acc))
        (i32x4.extract_lane 3 (local.get $acc)))
      (i32.add
        (i8x16.bitmask (local.get $acc))
        (i32.add (v128.any_true (local.get $acc)) (i8x16.all_true (local.get $acc)))))))
