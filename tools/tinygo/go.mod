module github.com/wasmsched/wasmsched/tools/tinygo

go 1.26

tool github.com/tinygo-org/tinygo

require (
	github.com/BurntSushi/toml v1.4.0 // indirect
	github.com/aykevl/go-wasm v0.0.2-0.20250317121156-42b86c494139 // indirect
	github.com/blakesmith/ar v0.0.0-20150311145944-8bd4349a67f2 // indirect
	github.com/chavacava/garif v0.1.0 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/creack/goselect v0.1.2 // indirect
	github.com/docker/libtrust v0.0.0-20160708172513-aabc10ec26b7 // indirect
	github.com/fatih/color v1.17.0 // indirect
	github.com/fatih/structtag v1.2.0 // indirect
	github.com/gofrs/flock v0.8.1 // indirect
	github.com/golangci/misspell v0.6.0 // indirect
	github.com/google/shlex v0.0.0-20181106134648-c34317bd91bf // indirect
	github.com/hashicorp/go-version v1.7.0 // indirect
	github.com/inhies/go-bytesize v0.0.0-20220417184213-4913239db9cf // indirect
	github.com/klauspost/compress v1.17.11 // indirect
	github.com/marcinbor85/gohex v0.0.0-20200531091804-343a4b548892 // indirect
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/mattn/go-runewidth v0.0.9 // indirect
	github.com/mattn/go-tty v0.0.4 // indirect
	github.com/mgechev/dots v0.0.0-20210922191527-e955255bf517 // indirect
	github.com/mgechev/revive v1.3.9 // indirect
	github.com/mitchellh/go-homedir v1.1.0 // indirect
	github.com/olekukonko/tablewriter v0.0.5 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/regclient/regclient v0.8.2 // indirect
	github.com/sigurn/crc16 v0.0.0-20211026045750-20ab5afb07e3 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	github.com/spf13/afero v1.11.0 // indirect
	github.com/tetratelabs/wazero v1.9.0 // indirect
	github.com/tinygo-org/tinygo v0.41.1 // indirect
	github.com/ulikunitz/xz v0.5.12 // indirect
	github.com/urfave/cli/v3 v3.0.0-beta1 // indirect
	go.bug.st/serial v1.6.4 // indirect
	go.bytecodealliance.org v0.6.2 // indirect
	go.bytecodealliance.org/cm v0.2.2 // indirect
	golang.org/x/mod v0.23.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
	golang.org/x/text v0.22.0 // indirect
	golang.org/x/tools v0.30.0 // indirect
	tinygo.org/x/espflasher v0.6.0 // indirect
	tinygo.org/x/go-llvm v0.0.0-20250422114502-b8f170971e74 // indirect
)
