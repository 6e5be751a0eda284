// Package web is the page `wasmsched ui` serves: the pods of the cluster
// and, for the pod chosen, what host/explain answers (a nodes × policies
// table, a heat map of scores, the reasons, a what-if), from files
// embedded in the binary (static/: plain HTML, CSS and JavaScript, no
// build step, nothing fetched from elsewhere).
//
// It only reads the cluster, through the user's kubeconfig. Every value
// the page shows (names, labels, reasons a guest wrote) is inserted as
// text, never as markup, and the Content-Security-Policy forbids inline
// scripts as a second line of defence. The server answers only requests
// addressed to the host it listens on (no DNS rebinding).
package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmsched/wasmsched/host/explain"
)

//go:embed static
var static embed.FS

// PodPage is the most pods one /api/pods answer lists.
const PodPage = 500

// Server serves the page and its API. Safe for concurrent use.
type Server struct {
	x *explain.Client

	mu sync.Mutex
	// loaded holds the profiles' policies loaded, by the revisions they
	// run, so that the next pod of a profile is explained without
	// compiling again.
	loaded map[string]*explain.Loaded
}

// New returns a server reading the cluster through x.
func New(x *explain.Client) *Server {
	return &Server{x: x, loaded: map[string]*explain.Loaded{}}
}

// Close releases the loaded policies.
func (s *Server) Close(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, l := range s.loaded {
		l.Close(ctx)
		delete(s.loaded, k)
	}
}

// Handler is the page and its API, answering only requests whose Host is
// one of hosts (the address the server listens on, and localhost names).
func (s *Server) Handler(hosts ...string) http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(static, "static")
	mux.Handle("GET /", http.FileServerFS(sub))
	mux.HandleFunc("GET /api/pods", s.pods)
	mux.HandleFunc("GET /api/explain", s.explain)
	mux.HandleFunc("GET /api/revisions", s.revisions)
	allowed := map[string]bool{}
	for _, h := range hosts {
		allowed[h] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if len(allowed) > 0 && !allowed[host] && !allowed[r.Host] {
			http.Error(w, "wasmsched ui: request for host "+strconv.Quote(r.Host)+" refused (it serves only the address it listens on)", http.StatusMisdirectedRequest)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
}

// PodRow is one pod in the list.
type PodRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Profile   string `json:"profile"`
	Node      string `json:"node,omitempty"`
	Pending   bool   `json:"pending"`
	Message   string `json:"message,omitempty"`
}

// PodList is /api/pods: one page of the pods matching the filters,
// pending first, and what the filters may choose from.
type PodList struct {
	Total      int      `json:"total"`
	Offset     int      `json:"offset"`
	Pods       []PodRow `json:"pods"`
	Namespaces []string `json:"namespaces"`
	Profiles   []string `json:"profiles"`
}

func (s *Server) pods(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cl, err := s.x.ReadCluster(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > PodPage {
		limit = PodPage
	}
	ns, prof, search := q.Get("namespace"), q.Get("profile"), strings.ToLower(q.Get("q"))
	nsSet, profSet := map[string]bool{}, map[string]bool{}
	var rows []PodRow
	for _, p := range cl.Pods {
		nsSet[p.Namespace], profSet[p.Spec.SchedulerName] = true, true
		if (ns != "" && p.Namespace != ns) || (prof != "" && p.Spec.SchedulerName != prof) ||
			(search != "" && !strings.Contains(strings.ToLower(p.Namespace+"/"+p.Name), search)) {
			continue
		}
		rows = append(rows, PodRow{Namespace: p.Namespace, Name: p.Name, Profile: p.Spec.SchedulerName,
			Node: p.Spec.NodeName, Pending: p.Spec.NodeName == "", Message: scheduled(p)})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Pending && !rows[j].Pending })
	out := PodList{Total: len(rows), Offset: min(max(offset, 0), len(rows)), Namespaces: keys(nsSet), Profiles: keys(profSet)}
	out.Pods = rows[out.Offset:min(out.Offset+limit, len(rows))]
	if out.Pods == nil {
		out.Pods = []PodRow{}
	}
	reply(w, out)
}

func scheduled(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status != v1.ConditionTrue {
			return c.Message
		}
	}
	return ""
}

// Explanation is /api/explain: the result, each node's group (the value
// of the label asked for, "" without it), and the what-if's moves.
type Explanation struct {
	*explain.Result
	GroupLabel string            `json:"groupLabel"`
	Groups     map[string]string `json:"groups"`
	WhatIf     *WhatIf           `json:"whatIf,omitempty"`
}

// WhatIf is the what-if's effect: the pod's fate under the serving
// revisions and under the what-if, and the pending pods that would move.
type WhatIf struct {
	Serving string         `json:"serving"`
	WhatIf  string         `json:"whatIf"`
	Pending int            `json:"pending"`
	Moves   []explain.Move `json:"moves"`
}

func (s *Server) explain(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	pod, err := s.x.ReadPod(ctx, q.Get("namespace"), q.Get("name"))
	if err != nil {
		fail(w, err)
		return
	}
	prof, err := s.x.ReadProfile(ctx, pod.Spec.SchedulerName)
	if err != nil {
		fail(w, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
		return
	}
	cl, err := s.x.ReadCluster(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	serving, err := s.load(ctx, prof)
	if err != nil {
		fail(w, err)
		return
	}
	res, err := s.x.Explain(ctx, serving, cl, pod)
	if err != nil {
		fail(w, err)
		return
	}
	out := Explanation{Result: res, GroupLabel: q.Get("group"), Groups: map[string]string{}}
	if wi := q.Get("whatif"); wi != "" {
		o, err := explain.ParseOverride(wi, explain.OverrideRevision)
		if err != nil {
			fail(w, err)
			return
		}
		if js := q.Get("settings"); js != "" {
			so, err := explain.ParseOverride(o.Name+"="+js, explain.OverrideSettings)
			if err != nil {
				fail(w, err)
				return
			}
			o.Settings = so.Settings
		}
		alt, err := s.x.Apply(ctx, prof, o)
		if err != nil {
			fail(w, err)
			return
		}
		whatIf, err := s.load(ctx, alt)
		if err != nil {
			fail(w, fmt.Errorf("what-if: %w", err))
			return
		}
		after, err := s.x.Explain(ctx, whatIf, cl, pod)
		if err != nil {
			fail(w, err)
			return
		}
		moves, pending, err := s.x.Moves(ctx, serving, whatIf, cl)
		if err != nil {
			fail(w, err)
			return
		}
		out.WhatIf = &WhatIf{Serving: res.Summary(), WhatIf: after.Summary(), Pending: pending, Moves: moves}
		out.Result = after
	}
	if out.GroupLabel != "" {
		for _, n := range cl.Nodes {
			out.Groups[n.Name] = n.Labels[out.GroupLabel]
		}
	}
	reply(w, out)
}

// load returns prof's policies loaded, from the cache when the same
// revisions were loaded before.
func (s *Server) load(ctx context.Context, prof *explain.Profile) (*explain.Loaded, error) {
	key := prof.Name
	for _, p := range prof.Policies {
		key += "|" + p.Name + "=" + p.Revision.Key + "@" + p.Revision.Module.SHA256
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.loaded[key]; l != nil {
		return l, nil
	}
	l, err := s.x.Load(ctx, prof)
	if err != nil {
		return nil, err
	}
	s.loaded[key] = l
	return l, nil
}

// PolicyRevisions is one policy's revisions for the what-if.
type PolicyRevisions struct {
	Name      string     `json:"name"`
	Serving   string     `json:"serving"`
	Revisions []Revision `json:"revisions"`
}

// Revision is one revision a what-if may choose.
type Revision struct {
	Digest   string          `json:"digest"`
	Settings json.RawMessage `json:"settings,omitempty"`
}

func (s *Server) revisions(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	prof, err := s.x.ReadProfile(ctx, r.URL.Query().Get("profile"))
	if err != nil {
		fail(w, err)
		return
	}
	out := []PolicyRevisions{}
	for _, p := range prof.Policies {
		revs, err := s.x.Revisions(ctx, prof, p.Name)
		if err != nil {
			fail(w, err)
			return
		}
		pr := PolicyRevisions{Name: p.Name, Serving: p.Revision.Module.SHA256, Revisions: []Revision{}}
		for _, rv := range revs {
			pr.Revisions = append(pr.Revisions, Revision{Digest: rv.Module.SHA256, Settings: rv.Settings})
		}
		out = append(out, pr)
	}
	reply(w, out)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers an error as JSON {"error": ...}: 403 for a missing right,
// 404 for what does not exist, else 422.
func fail(w http.ResponseWriter, err error) {
	code := http.StatusUnprocessableEntity
	var nw *explain.ErrNoWasmPolicy
	switch {
	case explain.IsRights(err):
		code = http.StatusForbidden
	case errors.As(err, &nw), strings.Contains(err.Error(), "not found"):
		code = http.StatusNotFound
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
