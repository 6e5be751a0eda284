module github.com/wasmsched/wasmsched/guest

go 1.24

require (
	github.com/wasmsched/wasmsched/abi v0.1.0
	go.yaml.in/yaml/v3 v3.0.4
)

require google.golang.org/protobuf v1.36.12 // indirect
