package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmsched/wasmsched/host/eval"
)

// File is a scenario file, read and validated.
type File struct {
	// Path is the file's path as it was given.
	Path      string
	Scenarios []*Scenario
}

// Scenario is one case: the policies, the cluster state and what is
// expected of the cycle.
type Scenario struct {
	// File is the path of the file that holds it, as given to ReadFile.
	File string
	// Name is unique within the file.
	Name     string
	Policies []Policy
	Input    eval.Input
	// Group, when set, is the pod group the scenario places instead of
	// Input.Pod (with Input's nodes, pods and objects).
	Group  *eval.GroupInput
	Expect Expect
}

// ID names the scenario in output and for selection: FILE/NAME.
func (s *Scenario) ID() string { return s.File + "/" + s.Name }

// Policy is one policy of a scenario, in composition order.
type Policy struct {
	// Name names the policy in reasons and errors, and for Runner.Modules;
	// by default the module's file name without .wasm (and .tinygo).
	Name string
	// Module is the path of the .wasm file: absolute, or relative to the
	// current directory (a relative path in a scenario file is resolved
	// against the file's directory when the file is read).
	Module string
	// Settings are the policy's settings as JSON; nil when there are none.
	Settings []byte
	// Weight is 1..100; 0 means 1.
	Weight int64
	// FailurePolicy is eval.FailurePolicyFail (also when empty) or
	// eval.FailurePolicyIgnore.
	FailurePolicy string
}

// ReadFile reads and validates a scenario file. Relative paths in it
// (modules, settings files, pod and node files) are resolved against its
// directory. Every problem found is returned, one per line, each naming the
// file, the scenario and the field; a file with any problem yields no
// scenarios.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse is ReadFile on data already read; path names the file in errors
// and is the base of its relative paths.
func Parse(path string, data []byte) (*File, error) {
	p := &parser{file: path, dir: filepath.Dir(path)}
	f := p.parse(data)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return f, nil
}

// The shapes of a file, decoded level by level so that an error can name
// the field it is about.
type rawFile struct {
	Policies  json.RawMessage   `json:"policies"`
	Scenarios []json.RawMessage `json:"scenarios"`
}

type rawScenario struct {
	Name     string          `json:"name"`
	Policies json.RawMessage `json:"policies"`
	Pod      json.RawMessage `json:"pod"`
	Nodes    json.RawMessage `json:"nodes"`
	Pods     json.RawMessage `json:"pods"`
	Objects  json.RawMessage `json:"objects"`
	Expect   json.RawMessage `json:"expect"`
	// A pod group to place instead of a pod (group.go).
	PodGroup json.RawMessage `json:"podGroup"`
	Members  json.RawMessage `json:"members"`
}

type rawPolicy struct {
	Name          string          `json:"name"`
	Module        string          `json:"module"`
	Settings      json.RawMessage `json:"settings"`
	SettingsFile  string          `json:"settingsFile"`
	Weight        int64           `json:"weight"`
	FailurePolicy string          `json:"failurePolicy"`
}

// parser collects the errors of one file.
type parser struct {
	file, dir string
	errs      []error
	// where names the scenario being read in errors: `scenario "NAME"`.
	where string
}

// fail records a problem with a field (a path such as expect.nodes.a-1).
func (p *parser) fail(field, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	parts := []string{p.file}
	if p.where != "" {
		parts = append(parts, p.where)
	}
	if field != "" {
		parts = append(parts, field)
	}
	p.errs = append(p.errs, errors.New(strings.Join(append(parts, msg), ": ")))
}

// decode decodes raw into v, refusing unknown fields; a problem is
// recorded against field and reported as false.
func (p *parser) decode(field string, raw json.RawMessage, v any) bool {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	err := d.Decode(v)
	if err == nil {
		return true
	}
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		f := field
		if te.Field != "" {
			f = strings.TrimPrefix(field+"."+te.Field, ".")
		}
		p.fail(f, "%s where %s was expected", article(te.Value), kindOf(te.Type))
	default:
		p.fail(field, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return false
}

// article names a JSON value kind as encoding/json reports it.
func article(value string) string {
	switch {
	case value == "array":
		return "a list"
	case value == "object":
		return "a mapping"
	case strings.HasPrefix(value, "number"):
		return "a number"
	case value == "bool":
		return "true or false"
	}
	return "a " + value
}

// kindOf names what a Go type takes in YAML words.
func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a " + t.String()
}

func (p *parser) parse(data []byte) *File {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		p.fail("", "not valid YAML: %v", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
		return nil
	}
	var raw rawFile
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) || !p.decode("", js, &raw) {
		if len(p.errs) == 0 {
			p.fail("", "empty: want policies and scenarios")
		}
		return nil
	}
	if len(raw.Scenarios) == 0 {
		p.fail("scenarios", "none: a file lists at least one scenario")
	}
	var defaults []Policy
	if raw.Policies != nil {
		defaults = p.policies("policies", raw.Policies)
	}
	f := &File{Path: p.file}
	names := map[string]int{}
	for i, rs := range raw.Scenarios {
		p.where = fmt.Sprintf("scenarios[%d]", i)
		if s := p.scenario(rs, defaults, raw.Policies != nil); s != nil {
			if j, dup := names[s.Name]; dup {
				p.fail("name", "scenario %d has the same name: names must be unique in a file", j+1)
			}
			names[s.Name] = i
			f.Scenarios = append(f.Scenarios, s)
		}
	}
	p.where = ""
	return f
}

func (p *parser) scenario(raw json.RawMessage, defaults []Policy, haveDefaults bool) *Scenario {
	// The name first, leniently: a problem in the rest is then reported
	// against the scenario's name rather than its index.
	var named struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &named) == nil && strings.TrimSpace(named.Name) != "" {
		p.where = fmt.Sprintf("scenario %q", named.Name)
	}
	var rs rawScenario
	if !p.decode("", raw, &rs) {
		return nil
	}
	if strings.TrimSpace(rs.Name) == "" {
		p.fail("name", "missing: every scenario has a name")
		return nil
	}
	p.where = fmt.Sprintf("scenario %q", rs.Name)
	s := &Scenario{File: p.file, Name: rs.Name}
	before := len(p.errs)
	switch {
	case rs.Policies != nil:
		s.Policies = p.policies("policies", rs.Policies)
	case haveDefaults:
		s.Policies = defaults
	default:
		p.fail("policies", "none: list them in the scenario or at the top of the file")
	}
	grouped := !isNull(rs.PodGroup) || !isNull(rs.Members)
	switch {
	case grouped && !isNull(rs.Pod):
		p.fail("pod", "a scenario places a pod or a pod group (podGroup and members), not both")
	case grouped:
		s.Group = p.group(rs.PodGroup, rs.Members)
	case isNull(rs.Pod):
		p.fail("pod", "missing: the pod to schedule, a file or an inline Pod")
	}
	if !grouped && !isNull(rs.Pod) {
		if pods := p.pods("pod", rs.Pod, true); len(pods) == 1 {
			s.Input.Pod = pods[0]
		}
	}
	if isNull(rs.Nodes) {
		p.fail("nodes", "missing: the nodes, a file or a list of files and inline Nodes")
	} else {
		s.Input.Nodes = p.nodes("nodes", rs.Nodes)
	}
	if !isNull(rs.Pods) {
		s.Input.Pods = p.pods("pods", rs.Pods, false)
	}
	if !isNull(rs.Objects) {
		p.objects("objects", rs.Objects, "", true, func(path string, data []byte) error {
			objs, err := eval.ParseObjects(path, data)
			s.Input.Objects = append(s.Input.Objects, objs...)
			return err
		})
	}
	if s.Group != nil {
		s.Group.Nodes, s.Group.Pods, s.Group.Objects = s.Input.Nodes, s.Input.Pods, s.Input.Objects
	}
	inputOK := len(p.errs) == before
	if inputOK {
		if _, err := eval.NodeInfos(s.Input); err != nil {
			p.fail("pods", "%v", err)
			inputOK = false
		}
	}
	if isNull(rs.Expect) {
		p.fail("expect", "missing: a scenario states what it expects")
		return nil
	}
	// The expectations are checked even when the input is not valid, so
	// that one run lists every problem; node names only against nodes
	// that were read.
	exp, ok := p.expect(rs.Expect, s.Input.Nodes, inputOK && s.Input.Nodes != nil)
	if !ok || !inputOK {
		return nil
	}
	s.Expect = exp
	return s
}

func isNull(raw json.RawMessage) bool {
	return raw == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func (p *parser) policies(field string, raw json.RawMessage) []Policy {
	var list []json.RawMessage
	if !p.decode(field, raw, &list) {
		return nil
	}
	if len(list) == 0 {
		p.fail(field, "empty: list at least one policy")
		return nil
	}
	var out []Policy
	names := map[string]int{}
	for i, item := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		var rp rawPolicy
		if !p.decode(f, item, &rp) {
			continue
		}
		pol := Policy{Name: rp.Name, Module: rp.Module, Weight: rp.Weight, FailurePolicy: rp.FailurePolicy}
		if rp.Module == "" {
			p.fail(f+".module", "missing: the policy's .wasm file")
			continue
		}
		if !filepath.IsAbs(pol.Module) {
			pol.Module = filepath.Join(p.dir, pol.Module)
		}
		if pol.Name == "" {
			pol.Name = NameOf(rp.Module)
		}
		if j, dup := names[pol.Name]; dup {
			p.fail(f+".name", "%s is the name of %s[%d] too: give one of them another name", pol.Name, field, j)
			continue
		}
		names[pol.Name] = i
		if rp.Weight < 0 || rp.Weight > 100 {
			p.fail(f+".weight", "%d is not in 1..100", rp.Weight)
		}
		if rp.FailurePolicy != "" && rp.FailurePolicy != eval.FailurePolicyFail && rp.FailurePolicy != eval.FailurePolicyIgnore {
			p.fail(f+".failurePolicy", "%q is neither %s nor %s", rp.FailurePolicy, eval.FailurePolicyFail, eval.FailurePolicyIgnore)
		}
		switch {
		case !isNull(rp.Settings) && rp.SettingsFile != "":
			p.fail(f, "settings and settingsFile both given: use one")
		case !isNull(rp.Settings):
			pol.Settings = compact(rp.Settings)
		case rp.SettingsFile != "":
			b, err := os.ReadFile(p.path(rp.SettingsFile))
			switch {
			case err != nil:
				p.fail(f+".settingsFile", "%v", err)
			case !json.Valid(b):
				p.fail(f+".settingsFile", "%s is not valid JSON", rp.SettingsFile)
			default:
				pol.Settings = b
			}
		}
		out = append(out, pol)
	}
	return out
}

// NameOf is the name a policy gets from its module's path, as `wasmsched
// eval` names it: the file name without .wasm, and without .tinygo, so
// that both builds of a policy give the same reasons.
func NameOf(module string) string {
	name := strings.TrimSuffix(filepath.Base(module), filepath.Ext(module))
	return strings.TrimSuffix(name, ".tinygo")
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// path resolves a path of the file against its directory.
func (p *parser) path(rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return filepath.Join(p.dir, rel)
}

// objects reads a field that holds a file name, an inline object, or a list
// of either (list says whether a list is allowed), as YAML documents of
// kind (any kind, each naming its own, when kind is ""), calling parse
// (eval.ParsePods, eval.ParseNodes or eval.ParseObjects) on each file or
// object.
func (p *parser) objects(field string, raw json.RawMessage, kind string, list bool, parse func(path string, data []byte) error) {
	raw = bytes.TrimSpace(raw)
	isList := list && len(raw) > 0 && raw[0] == '['
	items := []json.RawMessage{raw}
	if isList {
		var decoded []json.RawMessage
		if !p.decode(field, raw, &decoded) {
			return
		}
		if len(decoded) == 0 {
			p.fail(field, "empty list")
			return
		}
		items = decoded
	}
	for i, item := range items {
		f := field
		if isList {
			f = fmt.Sprintf("%s[%d]", field, i)
		}
		switch item = bytes.TrimSpace(item); {
		case len(item) > 0 && item[0] == '"':
			var name string
			_ = json.Unmarshal(item, &name)
			data, err := os.ReadFile(p.path(name))
			if err == nil {
				err = parse(p.path(name), data)
			}
			if err != nil {
				p.fail(f, "%v", err)
			}
		case len(item) > 0 && item[0] == '{':
			var obj map[string]any
			_ = json.Unmarshal(item, &obj)
			if _, ok := obj["kind"]; !ok && kind != "" {
				obj["kind"] = kind
			}
			data, _ := json.Marshal(obj)
			if err := parse(inline, data); err != nil {
				// eval names the document of a file; here the field does.
				p.fail(f, "%s", strings.TrimPrefix(err.Error(), inline+": document 1: "))
			}
		default:
			what := "a file name or an inline " + kind
			if kind == "" {
				what += "object"
			}
			if list && !isList {
				what += ", or a list of them"
			}
			p.fail(f, "want %s", what)
		}
	}
}

// inline is the name eval's parsers get for an object given inline.
const inline = "inline"

// pods reads pods (one when one is set: the pod to schedule).
func (p *parser) pods(field string, raw json.RawMessage, one bool) []*v1.Pod {
	var out []*v1.Pod
	p.objects(field, raw, "Pod", !one, func(path string, data []byte) error {
		pods, err := eval.ParsePods(path, data)
		out = append(out, pods...)
		return err
	})
	if one && len(out) > 1 {
		p.fail(field, "holds %d pods, want exactly 1", len(out))
		return nil
	}
	return out
}

func (p *parser) nodes(field string, raw json.RawMessage) []*v1.Node {
	var out []*v1.Node
	p.objects(field, raw, "Node", true, func(path string, data []byte) error {
		nodes, err := eval.ParseNodes(path, data)
		out = append(out, nodes...)
		return err
	})
	return out
}

// nodeNames is the set of the scenario's node names, sorted for messages.
func nodeNames(nodes []*v1.Node) (map[string]bool, []string) {
	set := map[string]bool{}
	var list []string
	for _, n := range nodes {
		set[n.Name] = true
		list = append(list, n.Name)
	}
	sort.Strings(list)
	return set, list
}
