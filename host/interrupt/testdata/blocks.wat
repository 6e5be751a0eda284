;; Multi-value and typed blocks, loops with parameters, br_table (one with
;; 200 targets, so its count is a two-byte LEB128) and typed select.
(module
  (type $pair (func (param i32 i32) (result i32 i32)))

  (func $swap (type $pair)
    (local.get 1)
    (local.get 0))

  ;; Quotient and remainder: a function with two results.
  (func (export "divmod") (param $a i32) (param $b i32) (result i32 i32)
    (i32.div_u (local.get $a) (local.get $b))
    (i32.rem_u (local.get $a) (local.get $b)))

  ;; fib(n) with the pair (a, b) carried through a loop's parameters.
  (func (export "fib") (param $n i32) (result i32)
    (local $t i32)
    i32.const 0
    i32.const 1
    loop $l (param i32 i32) (result i32 i32)
      local.get $n
      i32.eqz
      if (param i32 i32) (result i32 i32)
      else
        local.set $t
        local.get $t
        i32.add
        local.get $t
        call $swap
        local.get $n
        i32.const 1
        i32.sub
        local.set $n
        br $l
      end
    end
    drop)

  ;; A state machine: a loop dispatching with br_table.
  (func (export "machine") (param $steps i32) (result i32)
    (local $state i32)
    (local $acc i32)
    (block $out
      (loop $top
        (br_if $out (i32.eqz (local.get $steps)))
        (local.set $steps (i32.sub (local.get $steps) (i32.const 1)))
        (block $s2
          (block $s1
            (block $s0
              (br_table $s0 $s1 $s2 (local.get $state)))
            (local.set $acc (i32.add (local.get $acc) (i32.const 1)))
            (local.set $state (i32.const 1))
            (br $top))
          (local.set $acc (i32.mul (local.get $acc) (i32.const 3)))
          (local.set $state (i32.const 2))
          (br $top))
        (local.set $acc (i32.sub (local.get $acc) (i32.const 2)))
        (local.set $state (i32.const 0))
        (br $top)))
    (local.get $acc))

  ;; Sum over 0..n-1 of (i odd ? 3 : 1), dispatched through a 200-entry
  ;; br_table that carries a value, with a block of type index $pair and a
  ;; typed select.
  (func (export "parity") (param $n i32) (result i32)
    (local $i i32)
    (local $acc i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $acc
          (i32.add (local.get $acc)
            (block $even (result i32)
              (drop
                (block $odd (result i32)
                  (br_table $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even $odd $even
                    (i32.const 1)
                    (i32.rem_u (local.get $i) (i32.const 200)))))
              (i32.const 3))))
        (local.get $i)
        (i32.const 1)
        (block (type $pair) (param i32 i32) (result i32 i32)
          (call $swap))
        (select (result i32) (i32.const 0) (i32.const 1) (i32.const 0))
        (drop)
        (i32.add)
        (local.set $i)
        (br $next)))
    (local.get $acc)))
