package guest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// ParseSettings decodes the operator's JSON settings into v, which should
// hold the defaults beforehand. Empty settings leave v as it is; unknown
// fields are an error, so a misspelt setting is caught at load time rather
// than silently ignored.
func ParseSettings(raw []byte, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	if d.More() {
		return fmt.Errorf("settings: unexpected data after the JSON object")
	}
	var extra json.RawMessage
	if err := d.Decode(&extra); err != io.EOF {
		return fmt.Errorf("settings: unexpected data after the JSON object")
	}
	return nil
}

// Load builds a policy from the operator's settings in one call: it
// decodes raw over defaults with ParseSettings, then passes the result to
// build, which validates it and returns the policy (a policy's New). A
// policy's Settings hook is then
//
//	Settings: func(raw []byte) (err error) {
//		policy, err = guest.Load(raw, DefaultSettings(), New)
//		return err
//	},
//
// and its native tests call the same with settings of their own. Errors
// are ParseSettings' or build's, unchanged. JSON arrays and objects are
// decoded into the slices and maps of defaults: pass fresh ones, such as a
// DefaultSettings function returns.
func Load[S, P any](raw []byte, defaults S, build func(S) (P, error)) (P, error) {
	s := defaults
	if err := ParseSettings(raw, &s); err != nil {
		var zero P
		return zero, err
	}
	return build(s)
}
