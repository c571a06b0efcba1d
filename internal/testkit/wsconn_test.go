package testkit

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A WSConn reads binary messages as one stream, refuses any other, and
// writes each Write as one binary message.
func TestWSConnStreamsBinaryMessages(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for _, m := range []struct {
			op   int
			data string
		}{{websocket.BinaryMessage, "ab"}, {websocket.BinaryMessage, ""}, {websocket.BinaryMessage, "cd"}, {websocket.TextMessage, "no"}} {
			if err := ws.WriteMessage(m.op, []byte(m.data)); err != nil {
				return
			}
		}
		op, p, err := ws.ReadMessage()
		if err == nil && op == websocket.BinaryMessage {
			got <- string(p)
		}
		close(got)
	}))
	defer srv.Close()
	ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	c := NewWSConn(ws)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "abcd" {
		t.Fatalf("read %q, %v; want abcd", b, err)
	}
	if _, err := c.Read(b); !errors.Is(err, ErrNotBinary) {
		t.Fatalf("read of a text message: %v, want ErrNotBinary", err)
	}
	if n, err := c.Write([]byte("xyz")); n != 3 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if m := <-got; m != "xyz" {
		t.Fatalf("the server received %q, want one binary message xyz", m)
	}
}
