package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/presenced/presenced/internal/testkit"
)

// exampleChromium returns the Chromium program (EXAMPLES_CHROMIUM
// overrides it), failing the test without it (make deps installs Debian's
// chromium).
func exampleChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("EXAMPLES_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: run `make deps` (make test does)")
	return ""
}

// pageView is what the page shows: each list's users and their status.
type pageView struct {
	Conn    string            `json:"conn"`
	Count   string            `json:"count"`
	Members map[string]string `json:"members"`
	Users   map[string]string `json:"users"`
	Loads   int               `json:"loads"` // page loads since the test marked the window
}

const pageViewJS = `(() => {
  const list = (id) => Object.fromEntries([...document.querySelectorAll('#' + id + ' li')].map((li) => [li.dataset.user, li.dataset.status]))
  return {conn: document.getElementById('conn').dataset.state, count: document.getElementById('group-count').textContent,
    members: list('members'), users: list('users'), loads: window.__examplesMark || 0}
})()`

// examples/browser in a real browser: the example's server (go build
// ./examples/browser) serves the page and MQTT.js from examples/js;
// headless Chromium, driven with chromedp, loads it against the binary's
// WebSocket listener; real MQTT clients are alice and bob of the group
// team. The page must list the group's snapshot, then show bob going away
// and alice leaving as they happen, without a reload. With
// EXAMPLES_SCREENSHOT=path the page is saved there as a PNG once bob is
// away (docs/img/browser-example.png is made so).
func TestExamplesBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, starts a browser")
	}
	chromium := exampleChromium(t)
	exampleNode(t) // MQTT.js's bundle is in examples/js/node_modules
	mqttAddr, wsAddr := examplesBroker(t)

	jsDir, err := filepath.Abs(examplesJS)
	if err != nil {
		t.Fatal(err)
	}
	server := startExample(t, ".", nil, goBuild(t, t.TempDir(), "./examples/browser"), "-addr", "127.0.0.1:0", "-js", jsDir)
	_, line := server.waitLine(0, `^browser example on http://`)
	base := regexp.MustCompile(`http://\S+/`).FindString(line)
	t.Cleanup(func() { server.stop(false) })

	// alice and bob are online before the page loads: the snapshot says so.
	alice := dial5(t, mqttAddr, "alice-phone", "alice", withDevice("phone"))
	bob := dial5(t, mqttAddr, "bob-laptop", "bob", withDevice("laptop"))

	allocCtx := chromiumAllocator(t, chromium, 1000, 700)
	var mu sync.Mutex
	var console []string
	listen := func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var args []string
			for _, a := range e.Args {
				args = append(args, string(a.Value))
			}
			mu.Lock()
			console = append(console, string(e.Type)+": "+strings.Join(args, " "))
			mu.Unlock()
		case *runtime.EventExceptionThrown:
			mu.Lock()
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			console = append(console, "exception: "+msg)
			mu.Unlock()
		}
	}
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf), chromedp.WithListener(listen))
	t.Cleanup(cancelTab)

	// Start the browser on ctx itself: the browser lives as long as the
	// context of the first call, and the calls below have timeouts.
	start := time.Now()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	page := base + "?" + url.Values{"ws": {"ws://" + wsAddr + "/mqtt"}, "group": {examplesGroup}}.Encode()
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, 2*waitTimeout)
		defer cancel()
		if err := chromedp.Do(actx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	run("load "+page, chromedp.Navigate(page))
	run("mark the window", func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[int](`window.__examplesMark = 1`)(ctx, tg)
		return chromedp.Void{}, err
	})
	t.Logf("Chromium up and the page loaded in %v", time.Since(start).Round(time.Millisecond))

	var view pageView
	waitPage := func(what string, want func(v pageView) error) {
		t.Helper()
		_, err := testkit.Poll(2*waitTimeout, 20*time.Millisecond, func() error {
			actx, cancel := context.WithTimeout(ctx, waitTimeout)
			defer cancel()
			v, err := chromedp.Run(actx, chromedp.Evaluate[pageView](pageViewJS))
			if err != nil {
				return err
			}
			view = v
			if view.Loads != 1 {
				t.Fatalf("the page was loaded again (mark %d)", view.Loads)
			}
			return want(view)
		})
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("page: %s: %v\nshown: %+v\nconsole:\n%s", what, err, view, strings.Join(console, "\n"))
		}
	}
	shows := func(list map[string]string, want map[string]string) error {
		for u, s := range want {
			if list[u] != s {
				return fmt.Errorf("%s is %q, want %q", u, list[u], s)
			}
		}
		return nil
	}

	waitPage("the group's snapshot", func(v pageView) error {
		if v.Conn != "connected" {
			return fmt.Errorf("connection %q", v.Conn)
		}
		if err := shows(v.Members, map[string]string{"alice": "online", "bob": "online", "carol": "offline"}); err != nil {
			return err
		}
		if err := shows(v.Users, map[string]string{"alice": "online", "bob": "online"}); err != nil {
			return err
		}
		return testkit.Why(strings.HasPrefix(v.Count, "2 of 3 online"), "count "+v.Count)
	})

	bob.publish(t, "presence/set", `{"status":"away","text":"lunch"}`, 1, false)
	waitPage("bob away", func(v pageView) error {
		if err := shows(v.Members, map[string]string{"alice": "online", "bob": "away", "carol": "offline"}); err != nil {
			return err
		}
		return shows(v.Users, map[string]string{"bob": "away"})
	})
	if out := os.Getenv("EXAMPLES_SCREENSHOT"); out != "" {
		sctx, cancel := context.WithTimeout(ctx, 2*waitTimeout)
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", out, len(png))
	}

	alice.disconnect()
	waitPage("alice offline", func(v pageView) error {
		if err := shows(v.Members, map[string]string{"alice": "offline", "bob": "away", "carol": "offline"}); err != nil {
			return err
		}
		if err := shows(v.Users, map[string]string{"alice": "offline"}); err != nil {
			return err
		}
		return testkit.Why(strings.HasPrefix(v.Count, "1 of 3 online"), "count "+v.Count)
	})

	mu.Lock()
	for _, l := range console {
		if strings.HasPrefix(l, "error") || strings.HasPrefix(l, "exception") {
			t.Errorf("browser console: %s", l)
		}
	}
	mu.Unlock()
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}

// chromiumAllocator starts nothing yet: it returns the context from which
// chromedp starts chromium headless, with a fresh profile and the flags this
// machine's closed network needs; cleanup kills the browser and waits for it.
func chromiumAllocator(t *testing.T, chromium string, width, height int) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
	}
	for _, f := range []string{"headless", "no-sandbox", "disable-gpu", "disable-quic", "disable-background-networking",
		"disable-component-update", "disable-sync", "disable-extensions", "disable-dev-shm-usage", "disable-crash-reporter",
		"disable-breakpad", "mute-audio"} {
		opts = append(opts, chromedp.Flag(f, true))
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	return allocCtx
}
