package configs

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// battleTakeoversKey is the key whose explicit 0 means off.
const battleTakeoversKey = "presence.takeover_battle.takeovers"

// envPrefix starts the name of every environment variable Load reads.
const envPrefix = "PRESENCED_"

// envConfigFile names the config file, like --config. It and envAdminURL
// are the PRESENCED_* variables that are not config keys.
const envConfigFile = envPrefix + "CONFIG"

// envAdminURL is the admin API the operator's commands (presenced who,
// kick ...) talk to: the broker ignores it, so that one environment may
// serve both.
const envAdminURL = envPrefix + "ADMIN_URL"

// serviceLink matches the names of the variables Kubernetes puts into every
// pod for every Service in its namespace ("service links"). For a Service
// presenced-redis with port 6379 named "redis" they are
// PRESENCED_REDIS_SERVICE_HOST, PRESENCED_REDIS_SERVICE_PORT,
// PRESENCED_REDIS_SERVICE_PORT_REDIS, PRESENCED_REDIS_PORT,
// PRESENCED_REDIS_PORT_6379_TCP and PRESENCED_REDIS_PORT_6379_TCP_PROTO,
// _PORT and _ADDR. A Service named presenced gives PRESENCED_SERVICE_HOST,
// PRESENCED_PORT and so on.
var serviceLink = regexp.MustCompile(`^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$`)

// isServiceLink reports whether the variable name has the shape of a
// Kubernetes service link. No config key's variable has that shape (a test
// checks it), so Load can ignore such a variable when it matches no key.
func isServiceLink(name string) bool {
	return serviceLink.MatchString(name)
}

// flagKeys maps each flag other than --config to the key it sets.
var flagKeys = []struct{ flag, key, usage string }{
	{"node-id", "node_id", "node id (default: the host name)"},
	{"log-level", "log.level", "log level: debug, info, warn or error (default info)"},
	{"log-format", "log.format", "log format: json or console (default json)"},
	{"mqtt-addr", "mqtt.addr", `MQTT TCP listen address, or "off" (default ":1883")`},
	{"ws-addr", "mqtt.ws_addr", `MQTT WebSocket listen address, or "off" (default ":1882")`},
	{"admin-addr", "admin.addr", `admin HTTP listen address, or "off" (default "127.0.0.1:8080")`},
	{"presence", "presence.mode", `presence on, or off for the bare mochi broker (a benchmark baseline) (default on)`},
	{"redis-addr", "redis.addrs", `Redis address(es), comma-separated; empty: the in-memory store`},
}

// Load builds the config from, lowest precedence first: defaults, the YAML
// file named by --config (or PRESENCED_CONFIG), the PRESENCED_* variables in
// env, and the flags in args. It then applies defaults and validates.
//
// args are the command-line arguments without the program name; env is like
// os.Environ(). Usage text for -h/--help (which returns flag.ErrHelp) and
// flag errors goes to usage, which may be nil.
//
// Errors wrap ErrUnknownKey, ErrInvalid or ErrFile and name the key: its
// YAML path, the environment variable or the flag.
//
// An empty environment variable or flag value leaves the key as it was,
// except PRESENCED_PRESENCE_AUTHORITATIVE_DEVICES="", which means no
// devices; lists in the environment are comma-separated.
//
// A PRESENCED_* variable that matches no setting is an error, unless its
// name has the shape of a Kubernetes service link (PRESENCED_SERVICE_HOST,
// PRESENCED_PORT, PRESENCED_REDIS_PORT_6379_TCP_ADDR and the like, see
// serviceLink): those are ignored. LoadWithNotes says which.
func Load(args []string, env []string, usage io.Writer) (Config, error) {
	c, _, err := LoadWithNotes(args, env, usage)
	return c, err
}

// Notes is what LoadWithNotes noticed that is not an error, for the caller
// to log.
type Notes struct {
	// IgnoredEnv lists, sorted, the PRESENCED_* variables that matched no
	// setting but were ignored because their names have the shape of
	// Kubernetes service links (e.g. PRESENCED_SERVICE_HOST). Only names:
	// the values are not kept.
	IgnoredEnv []string
}

// LoadWithNotes is Load that also returns its Notes. On error the Notes are
// empty.
func LoadWithNotes(args []string, env []string, usage io.Writer) (Config, Notes, error) {
	if usage == nil {
		usage = io.Discard
	}
	l := loader{sources: make(map[string]string)}

	flagValues, configFlag, err := parseFlags(args, usage)
	if err != nil {
		return Config{}, Notes{}, err
	}
	envValues := environ(env)

	file, fileSource := configFlag, "--config"
	if file == "" {
		file, fileSource = envValues[envConfigFile], envConfigFile
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return Config{}, Notes{}, fmt.Errorf("configs: %w given by %s: %w", ErrFile, fileSource, err)
		}
		if err := l.decodeYAML(data, file); err != nil {
			return Config{}, Notes{}, err
		}
	}
	if err := l.applyEnv(envValues); err != nil {
		return Config{}, Notes{}, err
	}
	for _, f := range flagValues {
		if err := l.set(f.key, f.value, "flag --"+f.flag); err != nil {
			return Config{}, Notes{}, err
		}
	}

	// Every zero takes the default, but an explicit takeovers: 0 reads as
	// "no battle damping", as people mean it.
	if _, set := l.sources[battleTakeoversKey]; set && l.cfg.Presence.TakeoverBattle.Takeovers == 0 {
		l.cfg.Presence.TakeoverBattle.Takeovers = TakeoversOff
	}
	l.cfg.ApplyDefaults()
	errs := l.cfg.validate()
	for _, e := range errs {
		e.source = l.sources[e.key]
	}
	if err := joinKeyErrors(errs); err != nil {
		return Config{}, Notes{}, err
	}
	return l.cfg, Notes{IgnoredEnv: l.ignoredEnv}, nil
}

type flagValue struct{ flag, key, value string }

// parseFlags returns the flags that were given, in flagKeys order, and the
// --config value.
func parseFlags(args []string, usage io.Writer) ([]flagValue, string, error) {
	fs := flag.NewFlagSet("presenced", flag.ContinueOnError)
	fs.SetOutput(usage)
	configFile := fs.String("config", "", "YAML config file (also "+envConfigFile+"); see configs/presenced.yaml")
	values := make([]*string, len(flagKeys))
	for i, f := range flagKeys {
		values[i] = fs.String(f.flag, "", f.usage)
	}
	fs.Usage = func() { writeUsage(fs) }

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, "", err
		}
		sentinel := ErrInvalid
		if strings.HasPrefix(err.Error(), "flag provided but not defined") {
			sentinel = ErrUnknownKey
		}
		return nil, "", fmt.Errorf("configs: %w: %w", sentinel, err)
	}
	if fs.NArg() > 0 {
		return nil, "", fmt.Errorf("configs: %w: unexpected argument %q (presenced takes only flags)", ErrInvalid, fs.Arg(0))
	}

	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var given []flagValue
	for i, f := range flagKeys {
		if set[f.flag] {
			given = append(given, flagValue{flag: f.flag, key: f.key, value: *values[i]})
		}
	}
	return given, *configFile, nil
}

// usageHead starts the usage: the broker and the subcommands of
// cmd/presenced (passwd.go, token.go, health.go).
const usageHead = `Usage: presenced [flags]                 runs the broker
       presenced passwd FILE USER        sets USER's password in a password file (htpasswd -B)
       presenced token [-ttl 1h] [-groups g1,g2] [-observer] SECRET_FILE USER
                                         prints a development HS256 token for auth.jwt.hs256_secret_file
       presenced health [-addr ADDR]     exits 0 when the admin port answers ready
       presenced who [--status S] [--group G] [--node N] [--prefix P] [--json]
                                         lists users and their presence (the admin API)
       presenced user NAME [--json]      one user: presence, live and ended sessions
       presenced kick USER[/CLIENT_ID]   ends a user's sessions, or one (DISCONNECT 0x98)
       presenced account USER STATUS [TEXT] | USER --clear
                                         sets or clears a user's account status
       presenced forget USER             forgets an offline user
                                         (these five: --admin URL, --token; PRESENCED_ADMIN_URL,
                                         PRESENCED_ADMIN_TOKEN, PRESENCED_ADMIN_TOKEN_FILE)
       presenced --version               prints the version and exits
A subcommand's -h prints its own help.

Flags (single or double dash):
`

func writeUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, usageHead)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nPrecedence: defaults < config file < environment < flags.\n")
	fmt.Fprintf(w, "Every config file key can be set in the environment (lists comma-separated):\n")
	for _, lf := range leaves() {
		fmt.Fprintf(w, "  %-45s %s\n", lf.env, lf.path)
	}
	fmt.Fprintf(w, "Other PRESENCED_* variables are errors, except Kubernetes service links\n")
	fmt.Fprintf(w, "(PRESENCED_SERVICE_HOST, PRESENCED_PORT_1883_TCP_ADDR, ...), which are ignored.\n")
}

// environ turns "KEY=VALUE" entries into a map; a later entry wins.
func environ(env []string) map[string]string {
	m := make(map[string]string)
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

type loader struct {
	cfg        Config
	sources    map[string]string // key path -> where its value was set, for validation errors
	ignoredEnv []string          // Kubernetes service links that applyEnv skipped, sorted
}

// applyEnv applies every PRESENCED_* variable, in name order. Unknown
// variables are all reported, except Kubernetes service links, which are
// recorded in l.ignoredEnv.
func (l *loader) applyEnv(env map[string]string) error {
	byEnv := make(map[string]leaf)
	var names []string
	for _, lf := range leaves() {
		byEnv[lf.env] = lf
		names = append(names, lf.env)
	}

	var vars []string
	for k := range env {
		if strings.HasPrefix(k, envPrefix) && k != envConfigFile && k != envAdminURL {
			vars = append(vars, k)
		}
	}
	sort.Strings(vars)

	var errs []error
	for _, k := range vars {
		lf, ok := byEnv[k]
		if !ok && isServiceLink(k) {
			l.ignoredEnv = append(l.ignoredEnv, k)
			continue
		}
		if !ok {
			errs = append(errs, fmt.Errorf("configs: %w: environment variable %s matches no setting%s",
				ErrUnknownKey, k, didYouMean(k, names)))
			continue
		}
		if err := l.set(lf.path, env[k], k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// set parses raw into the leaf at path. source names where raw came from
// (an environment variable or a flag) and is used in error messages.
func (l *loader) set(path, raw, source string) error {
	lf, ok := leafByPath(path)
	if !ok { // a flagKeys entry naming no key: a bug caught by the tests
		return fmt.Errorf("configs: %w %q for %s", ErrUnknownKey, path, source)
	}
	v := reflect.ValueOf(&l.cfg).Elem().FieldByIndex(lf.index)
	if raw == "" && v.Kind() != reflect.Slice && v.Kind() != reflect.Map {
		return nil // empty means "not set"
	}
	if err := setFromString(v, raw); err != nil {
		return fmt.Errorf("configs: %w for %s (%s): %v", ErrInvalid, source, path, err)
	}
	l.sources[path] = "set by " + source
	return nil
}

// setFromString parses s into v according to v's type.
func setFromString(v reflect.Value, s string) error {
	if v.Kind() == reflect.Pointer { // a key where 0 means off: set, even to 0
		p := reflect.New(v.Type().Elem())
		if err := setFromString(p.Elem(), s); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	if v.Type() == durationType {
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false (got %q)", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want an integer (got %q)", s)
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want a non-negative integer (got %q)", s)
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want a number (got %q)", s)
		}
		v.SetFloat(f)
	case reflect.Map:
		if v.Type() != deviceDurationsType {
			return fmt.Errorf("unsupported type %s", v.Type())
		}
		m := DeviceDurations{} // "" is an explicit empty mapping
		if s != "" {
			for _, item := range strings.Split(s, ",") {
				k, d, ok := strings.Cut(strings.TrimSpace(item), "=")
				if !ok || k == "" {
					return fmt.Errorf("want label=duration pairs separated by commas, such as desktop=10m,sensor=0 (got %q)", item)
				}
				if _, dup := m[k]; dup {
					return fmt.Errorf("label %q given twice", k)
				}
				v, err := parseDuration(strings.TrimSpace(d))
				if err != nil {
					return fmt.Errorf("%s: %v", k, err)
				}
				m[k] = v
			}
		}
		v.Set(reflect.ValueOf(m))
	case reflect.Slice:
		if isSectionList(v.Type()) {
			return sectionsFromString(v, s)
		}
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported type %s", v.Type())
		}
		items := []string{} // "" is an explicit empty list, not nil
		if s != "" {
			for _, item := range strings.Split(s, ",") {
				items = append(items, strings.TrimSpace(item))
			}
		}
		v.Set(reflect.ValueOf(items).Convert(v.Type()))
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// decodeYAML decodes one YAML document strictly into l.cfg: every key must
// name a setting, every value must fit its type, and errors name the key by
// its YAML path and line. An empty document leaves everything at defaults.
func (l *loader) decodeYAML(data []byte, file string) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // our own walk below is what enforces it: we decode into a yaml.Node

	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty file
		}
		return syntaxError(data, file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return syntaxError(data, file, err)
		}
		return fmt.Errorf("configs: %w: %s line %d starts a second YAML document; want exactly one", ErrInvalid, file, line)
	}

	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	root = resolveAlias(root)
	if isNull(root) {
		return nil // "---" or "~" only
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("configs: %w: %s line %d: the document must be a mapping of keys (got %s)",
			ErrInvalid, file, root.Line, describe(root))
	}
	w := yamlWalker{file: file, sources: l.sources}
	w.mapping(root, reflect.ValueOf(&l.cfg).Elem(), "")
	return errors.Join(w.errs...)
}

// yamlLine is the "yaml: line N: " that starts the parser's errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError is the YAML parser's err for data, naming the line where the
// document stops being YAML. The parser names the line where the construct
// it was in began (for a bad indentation, the line of the mapping's first
// key, often line 1), so the line is found here: the first line whose
// addition to the lines before it makes the parser fail with the same
// problem. Only the start of a longer construct (a flow list, a quoted
// string) can fail so without being the cause: the problem then differs,
// and the search goes on. If no prefix fails so, the parser's line stays.
func syntaxError(data []byte, file string, err error) error {
	msg := err.Error()
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("configs: %w: cannot parse %s: %v", ErrInvalid, file, err)
	}
	problem := msg[len(m[0]):]
	line, _ := strconv.Atoi(m[1])
	lines := bytes.SplitAfter(data, []byte("\n"))
	// The problem comes after the start of the construct the parser names.
	parsed := 0
	for n := max(1, line-1); n <= len(lines) && parsed < maxSyntaxSearch; n++ {
		prefix := bytes.Join(lines[:n], nil)
		parsed += len(prefix)
		if perr := parseYAML(prefix); perr != nil {
			if pm := yamlLine.FindStringSubmatch(perr.Error()); pm != nil && perr.Error()[len(pm[0]):] == problem {
				line = n
				break
			}
		}
	}
	return fmt.Errorf("configs: %w: cannot parse %s line %d: %s", ErrInvalid, file, line, problem)
}

// maxSyntaxSearch bounds the bytes syntaxError parses (each line a parse
// of the lines before it): a search in a file of thousands of lines ends
// in milliseconds; past the bound the parser's line stays.
const maxSyntaxSearch = 32 << 20

// parseYAML parses every document of data, and returns the first error.
func parseYAML(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

type yamlWalker struct {
	file    string
	sources map[string]string
	errs    []error
}

// mapping decodes node's keys into the struct v, whose YAML path is prefix.
func (w *yamlWalker) mapping(node *yaml.Node, v reflect.Value, prefix string) {
	fields := structFields(v.Type())
	paths := make([]string, 0, len(fields)) // for "did you mean"
	for name := range fields {
		paths = append(paths, joinPath(prefix, name))
	}
	seen := make(map[string]int) // key -> line

	for i := 0; i+1 < len(node.Content); i += 2 {
		k, val := node.Content[i], resolveAlias(node.Content[i+1])
		path := joinPath(prefix, k.Value)
		if line, dup := seen[k.Value]; dup {
			w.errs = append(w.errs, fmt.Errorf("configs: %w: key %q appears twice in %s, lines %d and %d",
				ErrInvalid, path, w.file, line, k.Line))
			continue
		}
		seen[k.Value] = k.Line

		idx, ok := fields[k.Value]
		if !ok || k.Kind != yaml.ScalarNode {
			w.errs = append(w.errs, fmt.Errorf("configs: %w %q in %s line %d%s",
				ErrUnknownKey, path, w.file, k.Line, didYouMean(path, paths)))
			continue
		}
		fv := v.Field(idx)
		if isSection(fv.Type()) {
			switch {
			case isNull(val): // "mqtt:" with nothing under it
			case val.Kind == yaml.MappingNode:
				w.mapping(val, fv, path)
			default:
				w.errs = append(w.errs, fmt.Errorf("configs: %w for %q in %s line %d: want a mapping of keys (got %s)",
					ErrInvalid, path, w.file, val.Line, describe(val)))
			}
			continue
		}
		if isSectionList(fv.Type()) {
			w.sections(val, fv, path)
			w.sources[path] = fmt.Sprintf("set in %s line %d", w.file, k.Line)
			continue
		}
		if isDuration(fv.Type()) && val.Kind == yaml.ScalarNode && !isNull(val) {
			if _, err := parseDuration(val.Value); err != nil {
				w.errs = append(w.errs, fmt.Errorf("configs: %w for %q in %s line %d: %v",
					ErrInvalid, path, w.file, val.Line, err))
				continue
			}
		}
		if fv.Type() == deviceDurationsType && val.Kind == yaml.MappingNode && w.durations(val, path) {
			continue
		}
		if !tagFits(val, fv.Type()) {
			w.errs = append(w.errs, fmt.Errorf("configs: %w for %q in %s line %d: want %s (got %s)",
				ErrInvalid, path, w.file, val.Line, want(fv.Type()), describe(val)))
			continue
		}
		if err := val.Decode(fv.Addr().Interface()); err != nil {
			w.errs = append(w.errs, fmt.Errorf("configs: %w for %q in %s line %d: want %s (got %s)",
				ErrInvalid, path, w.file, val.Line, want(fv.Type()), describe(val)))
			continue
		}
		w.sources[path] = fmt.Sprintf("set in %s line %d", w.file, k.Line)
	}
}

// sections decodes a list of mappings (webhooks.endpoints) into the slice
// v, each item strictly, as a section at path[i]; an empty list is nil.
func (w *yamlWalker) sections(node *yaml.Node, v reflect.Value, path string) {
	v.Set(reflect.Zero(v.Type()))
	if isNull(node) {
		return
	}
	if node.Kind != yaml.SequenceNode {
		w.errs = append(w.errs, fmt.Errorf("configs: %w for %q in %s line %d: want a list of mappings (got %s)",
			ErrInvalid, path, w.file, node.Line, describe(node)))
		return
	}
	for i, item := range node.Content {
		item = resolveAlias(item)
		at := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind != yaml.MappingNode {
			w.errs = append(w.errs, fmt.Errorf("configs: %w for %q in %s line %d: want a mapping of keys (got %s)",
				ErrInvalid, at, w.file, item.Line, describe(item)))
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		w.mapping(item, elem, at)
		v.Set(reflect.Append(v, elem))
	}
}

// isSectionList reports whether t is a list of sections (webhooks.endpoints).
func isSectionList(t reflect.Type) bool { return t.Kind() == reflect.Slice && isSection(t.Elem()) }

// sectionsFromString decodes a list of sections from an environment
// variable or a flag: YAML (a flow list: [{url: ..., secret_file: ...}]).
func sectionsFromString(v reflect.Value, s string) error {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return fmt.Errorf("want a YAML list of mappings such as [{url: https://example.com/hook, secret_file: /run/secrets/hook}]: %v", err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			v.Set(reflect.Zero(v.Type()))
			return nil
		}
		root = root.Content[0]
	}
	w := yamlWalker{file: "the value", sources: map[string]string{}}
	w.sections(resolveAlias(root), v, "")
	return errors.Join(w.errs...)
}

// durations checks the values of a mapping of durations, and reports
// whether one is not a duration (it then has an error).
func (w *yamlWalker) durations(node *yaml.Node, path string) bool {
	bad := false
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, val := node.Content[i], resolveAlias(node.Content[i+1])
		if val.Kind != yaml.ScalarNode || isNull(val) {
			continue // Decode says what is wrong
		}
		if _, err := parseDuration(val.Value); err != nil {
			w.errs = append(w.errs, fmt.Errorf("configs: %w for %q in %s line %d: %s: %v",
				ErrInvalid, path, w.file, val.Line, k.Value, err))
			bad = true
		}
	}
	return bad
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe shows a YAML value in an error message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "an unexpected YAML node"
}

// tagFits rejects what yaml.v3 would quietly convert: a float such as 1.5
// truncated into an int, or a quoted "1024" for a number.
func tagFits(n *yaml.Node, t reflect.Type) bool {
	if isNull(n) || n.Kind != yaml.ScalarNode || t == durationType {
		return true // null is the zero value; other mismatches fail in Decode
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return n.ShortTag() == "!!int"
	case reflect.Float32, reflect.Float64:
		return n.ShortTag() == "!!int" || n.ShortTag() == "!!float"
	case reflect.Bool:
		return n.ShortTag() == "!!bool"
	}
	return true
}

// isDuration reports whether a leaf of type t is a duration (Duration or
// *Duration, for the keys where 0 means off).
func isDuration(t reflect.Type) bool {
	return t == durationType || t.Kind() == reflect.Pointer && t.Elem() == durationType
}

// want says what a leaf of type t looks like in YAML.
func want(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		return "a duration with a unit such as 60s, 2m or 500ms"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "a list such as [a, b] or []"
	case reflect.Map:
		return "a mapping of device labels to durations such as {desktop: 10m, sensor: 0}"
	}
	return t.String()
}

// didYouMean suggests the closest of candidates to name, if one is close.
func didYouMean(name string, candidates []string) string {
	best, bestDist := "", 3  // suggest only within 2 edits
	sort.Strings(candidates) // ties go the same way every time
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ---- the key tree, derived from the struct tags ----

var (
	durationType        = reflect.TypeFor[Duration]()
	deviceDurationsType = reflect.TypeFor[DeviceDurations]()
)

// leaf is one settable key.
type leaf struct {
	path  string // YAML path, "mqtt.server_keepalive"
	env   string // PRESENCED_MQTT_SERVER_KEEPALIVE
	index []int  // field index path in Config
	typ   reflect.Type
}

// leaves lists every key of Config, depth first in field order.
func leaves() []leaf {
	var out []leaf
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := yamlName(f)
			if name == "" {
				continue
			}
			path := joinPath(prefix, name)
			idx := append(append([]int(nil), index...), i)
			if isSection(f.Type) {
				walk(f.Type, path, idx)
				continue
			}
			out = append(out, leaf{path: path, env: envName(path), index: idx, typ: f.Type})
		}
	}
	walk(reflect.TypeFor[Config](), "", nil)
	return out
}

func leafByPath(path string) (leaf, bool) {
	for _, lf := range leaves() {
		if lf.path == path {
			return lf, true
		}
	}
	return leaf{}, false
}

// structFields maps the YAML names of t's fields to their index.
func structFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			m[name] = i
		}
	}
	return m
}

// yamlName is the field's YAML key, or "" for an unexported or `yaml:"-"` field.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return strings.ToLower(f.Name) // yaml.v3's own default
	}
	return name
}

// isSection reports whether t is a nested group of keys rather than a value.
func isSection(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t != durationType
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// envName is the environment variable for a YAML path:
// "mqtt.server_keepalive" -> "PRESENCED_MQTT_SERVER_KEEPALIVE".
func envName(path string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}
