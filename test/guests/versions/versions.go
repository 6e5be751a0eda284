// Package versions builds two versions of one test policy that place pods
// differently, for the hot-reload tests: version V passes only nodes
// labelled wasmsched-test/version=V, so where a pod lands tells which
// version judged it.
package versions

import "github.com/wasmsched/wasmsched/guest"

// Label is the node label the versions key on.
const Label = "wasmsched-test/version"

// Register registers version v.
func Register(v string) {
	reject := guest.RejectUnresolvable("versions: node is not for version %s", v)
	guest.Register(&guest.Policy{
		Name: "versions-" + v,
		Filter: func(_ *guest.Cycle, n *guest.NodeInfo) guest.Status {
			if got, _ := n.Label(Label); got == v {
				return guest.OK()
			}
			return reject
		},
	})
}
