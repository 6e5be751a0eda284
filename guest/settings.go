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
