module github.com/wasmsched/wasmsched/abi

go 1.24

require google.golang.org/protobuf v1.36.12
