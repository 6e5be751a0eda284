;; Bulk instructions whose work grows with an operand: fill(n) fills n
;; bytes once, spin(n) copies n bytes forever, tgrow(n) grows the table by
;; n and returns what table.grow answered, tfill(n) fills n entries.
(module
  (memory (export "memory") 1024 1024)
  (table $t 1 funcref)
  (func (export "fill") (param i32)
    i32.const 0
    i32.const 7
    local.get 0
    memory.fill)
  (func (export "spin") (param i32)
    (loop $l
      i32.const 0
      i32.const 1
      local.get 0
      memory.copy
      br $l))
  (func (export "tgrow") (param i32) (result i32)
    ref.null func
    local.get 0
    table.grow $t)
  (func (export "tsize") (result i32)
    table.size $t)
  (func (export "tfill") (param i32)
    i32.const 0
    ref.null func
    local.get 0
    table.fill $t))
