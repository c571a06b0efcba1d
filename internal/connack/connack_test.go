package connack

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// refused runs Refuse, with the client's server or without one, for a
// client of version v over a pipe and returns what the client read
// (nothing, when nothing was written).
func refused(t *testing.T, withServer bool, v byte, code, v3 packets.Code) []byte {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	srv := mqtt.New(nil)
	cl := srv.NewClient(a, "t", "c1", false)
	cl.Properties.ProtocolVersion = v
	got := make(chan []byte, 1)
	go func() {
		_ = b.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf, _ := io.ReadAll(b)
		got <- buf
	}()
	if !withServer {
		srv = nil
	}
	Refuse(srv, cl, code, v3)
	_ = a.Close()
	return <-got
}

func TestRefuse(t *testing.T) {
	// 3.1.1 with a v3 code: that code, not mochi's mapping.
	if got, want := refused(t, true, 4, packets.ErrBadUsernameOrPassword, Err3BadUsernameOrPassword), []byte{0x20, 2, 0, 0x04}; !bytes.Equal(got, want) {
		t.Errorf("3.1.1 with a v3 code: % x, want % x", got, want)
	}
	// 3.1.1 without one: mochi maps 0x86 to 0x05.
	if got, want := refused(t, true, 4, packets.ErrBadUsernameOrPassword, packets.Code{}), []byte{0x20, 2, 0, 0x05}; !bytes.Equal(got, want) {
		t.Errorf("3.1.1 mapped: % x, want % x", got, want)
	}
	// MQTT 5: the v5 code, whatever v3 says.
	got := refused(t, true, 5, packets.ErrQuotaExceeded, packets.Err3ServerUnavailable)
	if len(got) < 4 || got[0] != 0x20 || got[3] != packets.ErrQuotaExceeded.Code {
		t.Errorf("MQTT 5: % x, want a CONNACK 0x97", got)
	}
}

// Without a server, only a v3 code can be written.
func TestRefuseWithoutServer(t *testing.T) {
	if got := refused(t, false, 5, packets.ErrQuotaExceeded, packets.Err3ServerUnavailable); len(got) != 0 {
		t.Errorf("MQTT 5 without a server: wrote % x", got)
	}
	if got, want := refused(t, false, 4, packets.ErrQuotaExceeded, packets.Err3ServerUnavailable), []byte{0x20, 2, 0, 0x03}; !bytes.Equal(got, want) {
		t.Errorf("3.1.1 without a server: % x, want % x", got, want)
	}
}
