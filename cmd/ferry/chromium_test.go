package main

import (
	"context"
	"encoding/xml"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// chromium returns Debian's headless browser, skipping the test when it is
// missing on a developer's machine; CI must have it (deploy/stack.sh up
// installs it as root), so there its absence fails the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH: the status page test needs Debian's chromium (apt-get install chromium; deploy/stack.sh up installs it as root)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// headless runs chromium on url with args and returns what it printed on
// stdout. --virtual-time-budget lets the page's script run (its first
// fetches and their rendering) before chromium dumps or shoots it.
func headless(t *testing.T, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}
	cmd := exec.CommandContext(ctx, chromium(t), append(append(base, args...), url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// domNode is an element or a text node of a DOM that chromium dumped.
type domNode struct {
	tag      string // "" for a text node
	attrs    map[string]string
	text     string
	children []*domNode
}

// parseDOM reads chromium's --dump-dom output, which serializes the DOM
// as HTML: every element closed but the void ones, which encoding/xml's
// HTML mode closes itself; entities decoded as a browser shows them.
func parseDOM(t *testing.T, doc string) *domNode {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	root := &domNode{tag: "#document"}
	stack := []*domNode{root}
	for {
		tok, err := d.Token()
		if err != nil {
			break // io.EOF, or the end of what it could read: asserted on below
		}
		top := stack[len(stack)-1]
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &domNode{tag: strings.ToLower(tok.Name.Local), attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.attrs[strings.ToLower(a.Name.Local)] = a.Value
			}
			top.children = append(top.children, n)
			stack = append(stack, n)
		case xml.EndElement:
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			top.children = append(top.children, &domNode{text: string(tok)})
		}
	}
	if root.byID("updated") == nil {
		t.Fatalf("chromium's DOM has no #updated element:\n%s", doc)
	}
	return root
}

// walk calls f on n and every node below it, in document order.
func (n *domNode) walk(f func(*domNode)) {
	f(n)
	for _, c := range n.children {
		c.walk(f)
	}
}

func (n *domNode) byID(id string) *domNode {
	var found *domNode
	n.walk(func(c *domNode) {
		if found == nil && c.tag != "" && c.attrs["id"] == id {
			found = c
		}
	})
	return found
}

// all returns the elements below n that have class cls.
func (n *domNode) all(cls string) []*domNode {
	var out []*domNode
	n.walk(func(c *domNode) {
		if c.tag != "" && c != n && hasClass(c, cls) {
			out = append(out, c)
		}
	})
	return out
}

// one returns the only element below n of class cls, failing otherwise.
func (n *domNode) one(t *testing.T, cls string) *domNode {
	t.Helper()
	all := n.all(cls)
	if len(all) != 1 {
		t.Fatalf("%d elements of class %q in %q, want 1", len(all), cls, n.textContent())
	}
	return all[0]
}

func (n *domNode) hidden() bool {
	_, ok := n.attrs["hidden"]
	return ok
}

func hasClass(n *domNode, cls string) bool {
	for _, c := range strings.Fields(n.attrs["class"]) {
		if c == cls {
			return true
		}
	}
	return false
}

// textContent is the text of n and everything below it, as the DOM's
// textContent gives it.
func (n *domNode) textContent() string {
	var b strings.Builder
	n.walk(func(c *domNode) {
		if c.tag == "" {
			b.WriteString(c.text)
		}
	})
	return b.String()
}
