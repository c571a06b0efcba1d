package integration

import (
	"strings"
	"testing"

	"github.com/presenced/presenced/internal/testkit"
)

// A read of the users list that the node answered before a change, but
// that the page handles after the change's event came on the stream, must
// not undo the change on the page: the page keeps the newer version of a
// user. (Without it TestConsoleBinary's 1 s bound failed at random: bob's
// away came on the stream while the list, read again as the stream
// opened, was in flight, and showed only at the next 2 s poll.)
//
// The page's fetch is wrapped so that the list's response, once the node
// has answered it, is held until the event has been shown.
func TestConsoleListKeepsNewerEvent(t *testing.T) {
	bin := mnBinary(t) // skips with -short
	exampleChromium(t)
	p := binStart(t, bin, binEnv(consoleEnv...), "--mqtt-addr", "127.0.0.1:0", "--ws-addr", "off", "--admin-addr", "127.0.0.1:0",
		"--node-id", "console-race", "--log-format", "json")
	started := p.waitLine(t, "presenced started")
	mqttAddr, _ := started["mqtt"].(string)
	adminAddr, _ := started["admin"].(string)
	bob := dial5(t, mqttAddr, "bob-laptop", "bob", withDevice("laptop"))

	b := newConsoleBrowser(t)
	b.open("http://"+adminAddr+"/", consoleToken)
	b.route("#/users")
	b.waitView("bob online on the list", waitTimeout, func(v consoleView) error { return testkit.Why(v.Rows["bob"] == "online", "bob "+v.Rows["bob"]) })
	b.waitView("the stream live", waitTimeout, func(v consoleView) error { return testkit.Why(strings.Contains(v.Live, "on"), v.Live) })

	b.do("hold the list's responses", consoleJS(`(() => {
  const f = window.fetch;
  window.__held = 0;
  window.__hold = new Promise((r) => { window.__release = r; });
  window.fetch = async (...a) => {
    const r = await f(...a); // the node has answered
    if (String(a[0]).startsWith('/api/v1/users?') && window.__hold) { window.__held++; await window.__hold; }
    return r;
  };
})()`))
	testkit.Wait(t, waitTimeout, "a read of the list held (the page reads it every 2 s)", func() error {
		n, err := consoleEval[int](b, `window.__held`)
		if err != nil {
			return err
		}
		return testkit.Why(n >= 1, "none held yet")
	})
	bob.publish(t, "presence/set", `{"status":"away"}`, 1, false)
	b.waitView("bob away, from the stream", waitTimeout, func(v consoleView) error { return testkit.Why(v.Rows["bob"] == "away", "bob "+v.Rows["bob"]) })
	b.do("mark bob's row, then release the list", consoleJS(`document.querySelector('#users tr[data-user="bob"]').dataset.mark = '1'; window.__hold = null; window.__release()`))

	// The held list, read before bob's change, draws every row anew: bob's
	// row without the mark is the list's.
	var status string
	testkit.Wait(t, waitTimeout, "the held list drawn", func() error {
		s, err := consoleEval[string](b, `(() => { const r = document.querySelector('#users tr[data-user="bob"]'); return r && !r.dataset.mark ? r.dataset.status : ''; })()`)
		if err != nil {
			return err
		}
		status = s
		return testkit.Why(s != "", "bob's row not drawn again yet")
	})
	if status != "away" {
		t.Fatalf("the list read before bob's change drew bob %q over the newer away the stream had brought\n%s", status, b.logs())
	}
}
