package scenario

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// The policy author's guide documents every key a scenario accepts, in its
// format table.
func TestGuideTableListsEveryScenarioKey(t *testing.T) {
	guide, err := os.ReadFile("../../guest/README.md")
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(rawScenario{})
	for i := range typ.NumField() {
		key := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
		if row := "| `scenarios[]." + key + "` |"; !strings.Contains(string(guide), row) {
			t.Errorf("guest/README.md's scenario table has no row %s", row)
		}
	}
}
