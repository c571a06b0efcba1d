package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/presenced/presenced/presence"
)

// Commands: an operator's actions that another node must carry out (the
// admin API's kick and forget, see admin/actions.go). The store carries them
// and reports each one received as an Event of kind CommandReceived; whoever
// composes the node acts on it. Only the Redis store carries them (a
// Commander); with the memory store every session is the node's own.
//
// With Redis a command travels on classic pub/sub: P:cmd:<node> to one node
// (a kick: the node that holds the session), P:cmd to every node (a
// forget: every node drops its retained copy). Every node subscribes to
// both at start, with the node announcements. A command is never stored: a
// node that is down when it is sent does not hear it (its sessions are swept
// anyway).

// The commands' operations.
const (
	// CommandKick: end the session User/ID if it is still at Epoch
	// (never a newer session with the same client id), with DISCONNECT
	// reason Code.
	CommandKick = "kick"
	// CommandForget: drop what the node shows of User (its retained
	// presence); the store has forgotten the user already.
	CommandForget = "forget"
	// CommandNotify: publish Payload on User's notify topic to the node's
	// subscribers there (package notify: the node holds a live session of
	// User). Msg is the message's idempotency key, At when it was taken.
	CommandNotify = "notify"
)

// Command is one operator's action for another node.
type Command struct {
	Op    string `json:"op"`
	Node  string `json:"node,omitempty"`  // the node that acts; "" every node
	User  string `json:"user"`            // the user
	ID    string `json:"id,omitempty"`    // kick: the session's client id
	Epoch uint64 `json:"epoch,omitempty"` // kick: the session's epoch, as the store holds it
	Code  byte   `json:"code,omitempty"`  // kick: the MQTT 5 DISCONNECT reason code
	By    string `json:"by,omitempty"`    // who asked (the acting node logs it)
	// notify: the message (MaxNotifyPayload bytes at most), its id, QoS
	// and when it was taken.
	Msg     string    `json:"msg,omitempty"`
	Payload []byte    `json:"payload,omitempty"`
	QoS     byte      `json:"qos,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

// MaxNotifyPayload bounds a notify command's payload (notify.max_payload
// is at most this).
const MaxNotifyPayload = 8192

// maxCommand bounds a command message, and maxCommandField its client id
// and its By.
const (
	maxCommand      = 4096 + MaxNotifyPayload*4/3
	maxCommandField = 512
)

// ErrBadCommand is a command message that cannot be used.
var ErrBadCommand = errors.New("bad command")

// Validate checks a command's fields.
func (c Command) Validate() error {
	if err := presence.ValidUser(c.User); err != nil {
		return fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	if len(c.By) > maxCommandField || !utf8.ValidString(c.By) {
		return fmt.Errorf("%w: by", ErrBadCommand)
	}
	switch c.Op {
	case CommandKick:
		if presence.ValidSessionID(c.ID) != nil || c.Epoch == 0 || presence.ValidNode(c.Node) != nil {
			return fmt.Errorf("%w: kick needs a node, a client id and an epoch", ErrBadCommand)
		}
	case CommandForget:
	case CommandNotify:
		if presence.ValidNode(c.Node) != nil || c.Msg == "" || len(c.Msg) > maxCommandField || !utf8.ValidString(c.Msg) ||
			len(c.Payload) > MaxNotifyPayload || c.QoS > 1 {
			return fmt.Errorf("%w: notify needs a node, a message id, a payload of at most %d bytes and a QoS of 0 or 1", ErrBadCommand, MaxNotifyPayload)
		}
	default:
		return fmt.Errorf("%w: op %q", ErrBadCommand, c.Op)
	}
	return nil
}

// decodeCommand decodes and checks a command message.
func decodeCommand(b []byte) (Command, error) {
	if len(b) > maxCommand {
		return Command{}, fmt.Errorf("%w: %d bytes", ErrBadCommand, len(b))
	}
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	return c, c.Validate()
}

// Commander is a store that carries commands to the other nodes (Redis).
type Commander interface {
	// SendCommand sends c to node c.Node, or to every node when it is "".
	// It reports whether a node heard it, true when the store cannot tell
	// (a Redis Cluster, whose PUBLISH counts the subscribers of one
	// server only).
	SendCommand(ctx context.Context, c Command) (bool, error)
}

var _ Commander = (*Redis)(nil)
