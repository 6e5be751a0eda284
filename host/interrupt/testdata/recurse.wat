;; Calls that leave their function every way there is, so that the stack
;; accounting must give every frame back: run(n) calls each of them n times
;; at a nesting of 8 (the limit in the test allows a few dozen frames);
;; deep(n) recurses n deep with no loop; forever() recurses without end.
(module
  (func $viaReturn (param i32) (result i32)
    local.get 0
    i32.eqz
    if
      i32.const 1
      return
    end
    local.get 0
    i32.const 1
    i32.sub
    call $viaReturn)
  (func $viaBranch (param i32) (result i32)
    i32.const 2
    local.get 0
    i32.eqz
    br_if 0
    drop
    local.get 0
    i32.const 1
    i32.sub
    call $viaBranch)
  (func $viaTable (param i32) (result i32)
    (block $down (result i32)
      i32.const 3
      local.get 0
      br_table 1 $down)
    drop
    local.get 0
    i32.const 1
    i32.sub
    call $viaTable)
  (func $pair (param i32) (result i32 i64)
    local.get 0
    i32.eqz
    if (result i32 i64)
      i32.const 4
      i64.const 5
    else
      local.get 0
      i32.const 1
      i32.sub
      call $pair
    end)
  (func (export "run") (param $n i32) (result i32)
    (local $sum i32)
    (loop $again
      i32.const 8
      call $viaReturn
      i32.const 8
      call $viaBranch
      i32.add
      i32.const 8
      call $viaTable
      i32.add
      i32.const 8
      call $pair
      drop
      i32.add
      local.get $sum
      i32.add
      local.set $sum
      local.get $n
      i32.const 1
      i32.sub
      local.tee $n
      br_if $again)
    local.get $sum)
  (func $deep (export "deep") (param i32) (result i32)
    local.get 0
    i32.eqz
    if (result i32)
      i32.const 0
    else
      local.get 0
      i32.const 1
      i32.sub
      call $deep
      i32.const 1
      i32.add
    end)
  (func $forever (export "forever")
    call $forever))
