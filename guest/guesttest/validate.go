package guesttest

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// The API server's rules for names, label keys and values and annotation
// keys (apimachinery's pkg/util/validation), restated here because the SDK
// must not import Kubernetes code: an object the API server would refuse
// is refused here too, so that a test never passes on an object that could
// not exist in a cluster (a label value with a colon, a name with
// capitals).
const (
	dnsLabelMax      = 63
	dnsSubdomainMax  = 253
	labelValueMax    = 63
	qualifiedNameMax = 63
	annotationsMax   = 256 * 1024 // total bytes of keys and values
)

var (
	dnsLabelRE      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomainRE  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	qualifiedNameRE = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
)

// checkDNSSubdomain checks a name most kinds use (pods, nodes, custom
// resources).
func checkDNSSubdomain(s string) string {
	if len(s) > dnsSubdomainMax || !dnsSubdomainRE.MatchString(s) {
		return "a lowercase RFC 1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"
	}
	return ""
}

// checkDNSLabel checks a Namespace's name.
func checkDNSLabel(s string) string {
	if len(s) > dnsLabelMax || !dnsLabelRE.MatchString(s) {
		return "a lowercase RFC 1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
	}
	return ""
}

// checkQualifiedName checks a label or annotation key: an optional DNS
// subdomain prefix and '/', then a name of at most 63 characters.
func checkQualifiedName(s string) string {
	prefix, name, ok := strings.Cut(s, "/")
	if !ok {
		name, prefix = prefix, ""
	} else if prefix == "" || checkDNSSubdomain(prefix) != "" {
		return "a key whose prefix (before '/') is a lowercase DNS subdomain"
	}
	if len(name) > qualifiedNameMax || !qualifiedNameRE.MatchString(name) {
		return "a name of at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit, after an optional DNS subdomain prefix and '/'"
	}
	return ""
}

// checkLabelValue checks a label value: empty, or at most 63 characters of
// the qualified name's alphabet.
func checkLabelValue(s string) string {
	if s != "" && (len(s) > labelValueMax || !qualifiedNameRE.MatchString(s)) {
		return "empty, or at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	}
	return ""
}

// checkMeta checks an object's name, namespace, labels and annotations as
// the API server does on create; the error names the field and the rule.
func checkMeta(kind, name, namespace string, labels, annotations map[string]string) error {
	nameRule := checkDNSSubdomain
	if kind == "Namespace" {
		nameRule = checkDNSLabel
	}
	if why := nameRule(name); why != "" {
		return fmt.Errorf("%s %q would be refused by the API server: metadata.name must be %s", kind, name, why)
	}
	if namespace != "" {
		if why := checkDNSLabel(namespace); why != "" {
			return fmt.Errorf("%s %q would be refused by the API server: metadata.namespace %q must be %s", kind, name, namespace, why)
		}
	}
	for _, k := range sortedKeys(labels) {
		if why := checkQualifiedName(k); why != "" {
			return fmt.Errorf("%s %q would be refused by the API server: label key %q must be %s", kind, name, k, why)
		}
		if why := checkLabelValue(labels[k]); why != "" {
			return fmt.Errorf("%s %q would be refused by the API server: label %s value %q must be %s", kind, name, k, labels[k], why)
		}
	}
	total := 0
	for _, k := range sortedKeys(annotations) {
		if why := checkQualifiedName(strings.ToLower(k)); why != "" {
			return fmt.Errorf("%s %q would be refused by the API server: annotation key %q must be %s", kind, name, k, why)
		}
		total += len(k) + len(annotations[k])
	}
	if total > annotationsMax {
		return fmt.Errorf("%s %q would be refused by the API server: annotations take %d bytes, more than %d", kind, name, total, annotationsMax)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
