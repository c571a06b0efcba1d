package store

import (
	"context"
	"encoding/json"

	"github.com/redis/go-redis/v9"
)

// commands is the classic channel of the commands to every node, and
// nodeCommands that of the commands to one node (commands.go).
func (k keys) commands() string                { return k.prefix + "cmd" }
func (k keys) nodeCommands(node string) string { return k.prefix + "cmd:" + node }

// commandChannels are the channels this node hears commands on.
func (r *Redis) commandChannels() []string {
	return []string{r.k.commands(), r.k.nodeCommands(r.node)}
}

// SendCommand implements Commander.
func (r *Redis) SendCommand(ctx context.Context, c Command) (bool, error) {
	if err := c.Validate(); err != nil {
		return false, err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return false, err
	}
	ch := r.k.commands()
	if c.Node != "" {
		ch = r.k.nodeCommands(c.Node)
	}
	n, err := r.c.Publish(ctx, ch, b).Result()
	if err != nil {
		return false, r.fail("command", err)
	}
	r.up()
	return n > 0 || r.k.cluster, nil
}

// command reports a message of the classic subscription that is a command
// (a Command event), and says whether it was one.
func (r *Redis) command(m *redis.Message) bool {
	if m.Channel != r.k.commands() && m.Channel != r.k.nodeCommands(r.node) {
		return false
	}
	c, err := decodeCommand([]byte(m.Payload))
	if err != nil {
		r.stats.feedErrors.Add(1)
		r.log.Error("bad command on the command channel", "channel", m.Channel, "err", err)
		return true
	}
	if c.Node != "" && c.Node != r.node {
		return true // not this node's
	}
	r.report(Event{Kind: CommandReceived, Command: &c})
	return true
}
