package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dataworkers/dw/internal/mcpserver/wire"
)

// session is one client's session: answered here while the agent is
// built, then passed through to it.
type session struct {
	agent   *agentData
	version string
	build   *build
	in      io.Reader
	out     io.Writer
	max     int // DW_MAX_MESSAGE_BYTES, as the agent reads it
	logger  *slog.Logger
	signals <-chan os.Signal

	// Zero means the default; tests shorten them.
	poll      time.Duration // how often bin/ is looked at
	heartbeat time.Duration // how often a waiting call with a progress token hears of it
	drain     time.Duration // how long calls still waiting when input ends may wait for the build
	queueCap  int           // bytes of messages held for the agent

	outMu sync.Mutex

	initID     json.RawMessage // the initialize answered here
	negotiated string          // the protocol version it was answered with
	queue      []*queued
	queued     int    // bytes in queue
	failure    string // why the agent cannot start; "" while it is being built
	noStart    bool   // starting bin/AGENT failed: do not try again
}

// queued is a message held for the agent, in the order it came.
type queued struct {
	line   []byte
	id     json.RawMessage
	method string
	init   bool // the initialize answered here: replayed, its answer dropped
	batch  bool // a JSON-RPC batch, held whole: the agent takes it apart
	token  json.RawMessage
	since  time.Time
	sent   float64 // the last progress sent for it
}

func (q *queued) call() bool { return q.id != nil && q.method != "" && !q.init }

// Defaults, each following the agent's own where it has one.
const (
	defaultPoll      = 250 * time.Millisecond
	defaultHeartbeat = 2 * time.Second  // mcpserver's progress heartbeat
	defaultDrain     = 10 * time.Second // mcpserver.DefaultDrainTimeout
	// The agent's answer to the replayed initialize is waited for before
	// anything else is replayed, so nothing is sent ahead of it.
	initAnswerWait = 30 * time.Second
	// On SIGTERM the agent exits within its 1.5 s grace.
	signalWait = 2 * time.Second
)

// event is one thing read from the client: a line or the end of input.
type event struct {
	wire.Line
	err error
}

func (s *session) run() int {
	if s.poll == 0 {
		s.poll = defaultPoll
	}
	if s.heartbeat == 0 {
		s.heartbeat = defaultHeartbeat
	}
	if s.drain == 0 {
		s.drain = defaultDrain
	}
	if s.queueCap == 0 {
		// Room for the largest message an agent takes and then some: more
		// than that is not a session waiting for its first build.
		s.queueCap = 2 * s.max
	}
	s.logger.Info("the agents are being built; answering the client until "+s.agent.Name+" is ready", "agent", s.agent.Name, "log", filepath.Join(s.build.bin, ".build.log"))
	lines := make(chan event)
	go func() {
		r := wire.NewReader(s.in, s.max)
		for {
			l, err := r.Next()
			lines <- event{Line: l, err: err}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	beat := time.NewTicker(s.heartbeat)
	defer beat.Stop()
	var ended time.Time // when the client's input ended
	for {
		select {
		case ev := <-lines:
			if ev.err != nil {
				if ev.err != io.EOF {
					s.logger.Warn("reading stdin failed", "err", ev.err)
				}
				if s.waiting() == 0 {
					return 0
				}
				ended, lines = time.Now(), nil
				continue
			}
			s.receive(ev.Line)
		case <-tick.C:
			st, why := s.build.check(time.Now())
			switch {
			case st == done && !s.noStart:
				if code, ok := s.handOver(lines); ok {
					return code
				}
			case st == failed && s.failure == "":
				s.fail(why)
			}
			if !ended.IsZero() && (s.waiting() == 0 || time.Since(ended) >= s.drain) {
				s.abandon()
				return 0
			}
		case <-beat.C:
			s.progress()
		case sig := <-s.signals:
			s.logger.Info("signal received before the agent was built; exiting", "agent", s.agent.Name, "signal", sig)
			return 0
		}
	}
}

// receive handles one line while the agent is being built: initialize,
// ping and tools/list are answered as the agent would; a bad line gets
// the agent transport's error; everything else waits for the agent.
func (s *session) receive(l wire.Line) {
	if l.TooBig > 0 {
		s.reply(wire.TooBig(l, s.max))
		return
	}
	// A session that negotiated the one revision with batches may send
	// one: it is held whole for the agent, whose transport reads it, as
	// its members' order and answers are the agent's to keep.
	if line := bytes.TrimSpace(l.Data); len(line) > 0 && line[0] == '[' && s.negotiated == wire.BatchVersion && wire.CheckLine(line) == nil {
		s.enqueueBatch(line)
		return
	}
	m, p := wire.Check(l.Data)
	if p != nil {
		if p.Code != 0 {
			s.reply(*p)
		}
		return
	}
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(m.Line, &env) // Check has read the envelope
	// A request of the stateless protocol (2026-07-28) carries its version
	// in _meta: only the agent can answer those.
	modern := hasMeta(env.Params, "io.modelcontextprotocol/protocolVersion")
	switch {
	case m.Method == "" && m.ID != nil:
		// An answer to a request this session never sent: the agent's SDK
		// would drop it too.
		s.logger.Debug("dropping a response to no request", "id", string(m.ID))
		return
	case m.Method == "ping" && m.ID != nil && !modern:
		s.result(m.ID, []byte(`{}`))
		return
	case m.Method == "initialize" && m.ID != nil && s.initID == nil && !modern:
		if v, ok := requestedVersion(env.Params); ok {
			s.initID, s.negotiated = m.ID, negotiate(v)
			s.result(m.ID, s.initializeResult(s.negotiated))
			s.enqueue(m, env.Params, true)
			return
		}
	case m.Method == "tools/list" && m.ID != nil && s.initID != nil && !modern && firstPage(env.Params):
		s.result(m.ID, s.agent.Tools)
		return
	case m.Method == "server/discover" && m.ID != nil:
		// The agent speaks the stateless protocol too, but this session
		// must start with initialize so that it can be replayed to the
		// agent: a client falls back to initialize on this error.
		s.errorReply(m.ID, wire.CodeMethodNotFound, fmt.Sprintf("server/discover is not available while %s is being built; use initialize", s.agent.Name))
		return
	case m.Method == "notifications/cancelled":
		if s.cancel(env.Params) {
			return
		}
	}
	s.enqueue(m, env.Params, false)
}

// enqueue holds a message for the agent, or answers it when it never can
// be: the build failed, or the queue is full.
func (s *session) enqueue(m wire.Message, params json.RawMessage, init bool) {
	session := init || m.Method == "notifications/initialized"
	switch {
	case s.failure != "" && !session:
		s.refuse(m, s.failure)
		return
	case s.queued+len(m.Line) > s.queueCap && !session:
		s.refuse(m, fmt.Sprintf("%s is still being built and already holds %d bytes of messages waiting for it (at most %d); send this again once the earlier calls are answered", s.agent.Name, s.queued, s.queueCap))
		return
	}
	q := &queued{line: m.Line, id: m.ID, method: m.Method, init: init, since: time.Now()}
	if m.Method == "tools/call" {
		q.token = progressToken(params)
	}
	s.queue = append(s.queue, q)
	s.queued += len(m.Line)
}

// enqueueBatch holds a batch line for the agent, or answers it with one
// error (a batch that never reaches the agent has no members answered).
func (s *session) enqueueBatch(line []byte) {
	switch {
	case s.failure != "":
		s.errorReply(nil, wire.CodeInternalError, s.failure)
		return
	case s.queued+len(line) > s.queueCap:
		s.errorReply(nil, wire.CodeInternalError, fmt.Sprintf("%s is still being built and already holds %d bytes of messages waiting for it (at most %d); send this batch again once the earlier calls are answered", s.agent.Name, s.queued, s.queueCap))
		return
	}
	s.queue = append(s.queue, &queued{line: line, batch: true, since: time.Now()})
	s.queued += len(line)
}

// waiting counts the calls held for the agent that the client waits on.
func (s *session) waiting() int {
	n := 0
	for _, q := range s.queue {
		if q.call() {
			n++
		}
	}
	return n
}

// cancel drops a held call the client cancelled: it is never run, as the
// client no longer wants it (the agent would not answer it either).
func (s *session) cancel(params json.RawMessage) bool {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return false
	}
	for i, q := range s.queue {
		if q.call() && wire.SameID(q.id, p.RequestID) {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			s.queued -= len(q.line)
			return true
		}
	}
	return false
}

// fail answers every held call with why the agent cannot start and
// answers later ones so too. The handshake is kept: if a build puts the
// agent in place after all (make build in a terminal), it still takes
// the session over.
func (s *session) fail(why string) {
	s.failure = why
	s.logger.Error("the agent cannot start; answering every call with why", "agent", s.agent.Name, "why", why)
	kept := s.queue[:0]
	for _, q := range s.queue {
		switch {
		case q.init || q.method == "notifications/initialized":
			kept = append(kept, q)
		case q.call():
			s.refuse(wire.Message{ID: q.id, Method: q.method}, why)
			s.queued -= len(q.line)
		case q.batch:
			s.errorReply(nil, wire.CodeInternalError, why)
			s.queued -= len(q.line)
		default:
			s.queued -= len(q.line)
		}
	}
	s.queue = kept
}

// abandon answers the calls still waiting when the client's input ended
// and the build did not finish within the drain time, as the agent's
// transport answers calls still running after its drain timeout.
func (s *session) abandon() {
	for _, q := range s.queue {
		why := fmt.Sprintf("the client closed its input and %s was still being built %s later; this call was not run", s.agent.Name, s.drain)
		switch {
		case q.call():
			s.refuse(wire.Message{ID: q.id, Method: q.method}, why)
		case q.batch:
			s.errorReply(nil, wire.CodeInternalError, strings.Replace(why, "this call was", "this batch's calls were", 1))
		}
	}
	s.queue = nil
}

// progress tells each waiting call that sent a progress token what it is
// waiting for, at least every heartbeat, as the agent does for a call
// that runs: elapsed seconds, rising.
func (s *session) progress() {
	for _, q := range s.queue {
		if q.token == nil || !q.call() {
			continue
		}
		el := time.Since(q.since)
		if el.Seconds() <= q.sent {
			continue
		}
		q.sent = el.Seconds()
		s.write(encode(struct {
			JSONRPC string `json:"jsonrpc"`
			Method  string `json:"method"`
			Params  any    `json:"params"`
		}{"2.0", "notifications/progress", struct {
			Token    json.RawMessage `json:"progressToken"`
			Message  string          `json:"message"`
			Progress float64         `json:"progress"`
		}{q.token, fmt.Sprintf("%s: waiting for the first build of the agents (%s so far; log: %s); the call runs as soon as it is done",
			s.agent.Name, el.Round(time.Second), filepath.Join(s.build.bin, ".build.log")), q.sent}}))
	}
}

// handOver starts the agent, replays the session to it and passes it
// through until it ends; ok is false when the agent did not start.
func (s *session) handOver(lines <-chan event) (code int, ok bool) {
	path := filepath.Join(s.build.bin, s.agent.Name)
	cmd := exec.Command(path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err == nil {
		var stdout io.ReadCloser
		if stdout, err = cmd.StdoutPipe(); err == nil {
			if err = cmd.Start(); err == nil {
				return s.proxy(cmd, stdin, stdout, lines), true
			}
		}
	}
	s.noStart = true
	s.fail(fmt.Sprintf("%s could not start: %v. Run `make build` in %s, then reconnect (in Claude Code: /mcp).", s.agent.Name, err, filepath.Dir(s.build.bin)))
	return 0, false
}

// proxy replays the session to the started agent, then passes messages
// both ways until the agent exits, and returns its exit code.
func (s *session) proxy(cmd *exec.Cmd, stdin io.WriteCloser, stdout io.Reader, lines <-chan event) int {
	s.logger.Info("the agent is built; handing the session over", "agent", s.agent.Name, "held", len(s.queue))
	a := &fromAgent{s: s, initID: s.initID, initAnswered: make(chan struct{}), offsets: map[string]float64{}, calls: map[string]string{}}
	for _, q := range s.queue {
		if q.call() && q.token != nil && q.sent > 0 {
			// The agent counts its progress from 0 again: shift it above
			// what this call was already told, so the client sees it rise.
			a.offsets[key(q.token)] = math.Floor(q.sent) + 1
			a.calls[key(q.id)] = key(q.token)
		}
	}
	agentDone := make(chan struct{})
	go func() {
		a.pump(stdout)
		close(agentDone)
	}()
	send := func(line []byte) {
		if !bytes.HasSuffix(line, []byte("\n")) {
			line = append(line[:len(line):len(line)], '\n')
		}
		// A write fails only when the agent has gone; agentDone says so.
		_, _ = stdin.Write(line)
	}
	for _, q := range s.queue {
		send(q.line)
		if q.init {
			select {
			case <-a.initAnswered:
			case <-agentDone:
			case <-time.After(initAnswerWait):
				s.logger.Warn("the agent did not answer the replayed initialize; replaying the rest", "agent", s.agent.Name, "waited", initAnswerWait)
			}
		}
	}
	s.queue, s.queued = nil, 0
	if lines == nil { // the client's input had ended already
		stdin.Close()
	}
	exit := func() int {
		err := cmd.Wait()
		if cmd.ProcessState == nil {
			s.logger.Error("waiting for the agent failed", "err", err)
			return 1
		}
		if c := cmd.ProcessState.ExitCode(); c >= 0 {
			return c
		}
		return 1 // killed by a signal
	}
	for {
		select {
		case ev := <-lines:
			switch {
			case ev.err != nil:
				// The agent finishes its running calls (up to its drain
				// timeout) and exits; so does this process, with its status.
				stdin.Close()
				lines = nil
			case ev.TooBig > 0:
				// Not kept whole, so not passed on: answered as the agent would.
				s.reply(wire.TooBig(ev.Line, s.max))
			default:
				send(ev.Data)
			}
		case <-agentDone:
			return exit()
		case sig := <-s.signals:
			s.logger.Info("signal received; passing it to the agent", "agent", s.agent.Name, "signal", sig)
			_ = cmd.Process.Signal(sig)
			select {
			case <-agentDone:
			case <-time.After(signalWait):
				s.logger.Warn("the agent did not exit after the signal; killing it", "agent", s.agent.Name, "waited", signalWait)
				_ = cmd.Process.Kill()
				<-agentDone
			}
			return exit()
		}
	}
}

// fromAgent passes the agent's output to the client.
type fromAgent struct {
	s            *session
	initID       json.RawMessage // the replayed initialize, whose answer the client has had
	initAnswered chan struct{}
	// offsets shift the progress of calls that were told of the build;
	// calls maps each such call's id to its token, so the shift ends
	// with the call.
	offsets map[string]float64
	calls   map[string]string
}

func (a *fromAgent) pump(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			a.pass(line)
		}
		if err != nil {
			return
		}
	}
}

// pass writes one of the agent's lines to the client, except its answer
// to the replayed initialize.
func (a *fromAgent) pass(line []byte) {
	if a.initID == nil && len(a.offsets) == 0 {
		a.s.write(line)
		return
	}
	var msg struct {
		ID     json.RawMessage            `json:"id"`
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &msg) != nil {
		a.s.write(line)
		return
	}
	switch {
	case a.initID != nil && msg.Method == "" && wire.SameID(msg.ID, a.initID):
		switch {
		case msg.Result == nil:
			a.s.logger.Warn("the agent refused the replayed initialize", "agent", a.s.agent.Name, "error", string(msg.Error))
		case msg.Result.ProtocolVersion != a.s.negotiated:
			a.s.logger.Warn("the agent negotiated another protocol version than the starter answered", "agent", a.s.agent.Name,
				"starter", a.s.negotiated, "agent_version", msg.Result.ProtocolVersion)
		}
		a.initID = nil
		close(a.initAnswered)
		return
	case msg.Method == "notifications/progress":
		var tok json.RawMessage = msg.Params["progressToken"]
		if off, ok := a.offsets[key(tok)]; ok {
			line = shiftProgress(msg.Params, off)
		}
	case msg.Method == "" && msg.ID != nil:
		if tok, ok := a.calls[key(msg.ID)]; ok {
			delete(a.offsets, tok)
			delete(a.calls, key(msg.ID))
		}
	}
	a.s.write(line)
}

// shiftProgress is a progress notification with progress (and total)
// raised by off.
func shiftProgress(params map[string]json.RawMessage, off float64) []byte {
	for _, f := range []string{"progress", "total"} {
		var v float64
		if raw, ok := params[f]; ok && json.Unmarshal(raw, &v) == nil {
			params[f] = json.RawMessage(strconv.FormatFloat(v+off, 'g', -1, 64))
		}
	}
	return encode(struct {
		JSONRPC string                     `json:"jsonrpc"`
		Method  string                     `json:"method"`
		Params  map[string]json.RawMessage `json:"params"`
	}{"2.0", "notifications/progress", params})
}

// initializeResult is the agent's answer to initialize, but for the
// instructions, which say what only the running agent can: the
// configuration in use and the demo time.
func (s *session) initializeResult(protocolVersion string) []byte {
	return encode(struct {
		Capabilities    json.RawMessage `json:"capabilities"`
		Instructions    string          `json:"instructions,omitempty"`
		ProtocolVersion string          `json:"protocolVersion"`
		ServerInfo      struct {
			Name    string `json:"name"`
			Title   string `json:"title,omitempty"`
			Version string `json:"version"`
		} `json:"serverInfo"`
	}{
		Capabilities:    s.agent.Capabilities,
		Instructions:    s.agent.Instructions + "\n\n" + firstSessionNote,
		ProtocolVersion: protocolVersion,
		ServerInfo: struct {
			Name    string `json:"name"`
			Title   string `json:"title,omitempty"`
			Version string `json:"version"`
		}{s.agent.Name, s.agent.Title, s.version},
	})
}

// firstSessionNote ends the instructions of a session that began before
// the agent was built.
const firstSessionNote = "This session began while the agents were being built for the first time, so these instructions leave out which configuration and store are in use: `dw config` says it, and so do the instructions of the next session. On the embedded default (no dw.yaml) every tool answer ends with the demo time. The tools are listed already; the first tool call waits for the build to finish (log: bin/.build.log), then runs."

// protocolVersions are the versions the agents' SDK (go-sdk v1.8.0)
// supports, newest first (TestProtocolVersionsAreTheSDKs).
var protocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// statelessFrom is the first version of the stateless protocol, which
// initialize never negotiates.
const statelessFrom = "2026-07-28"

// negotiate answers a requested version as the SDK's initialize does: the
// client's when supported (and older than the stateless protocol), else
// the newest that is.
func negotiate(requested string) string {
	for _, v := range protocolVersions {
		if v == requested && v < statelessFrom {
			return v
		}
	}
	for _, v := range protocolVersions {
		if v < statelessFrom {
			return v
		}
	}
	return "2025-11-25"
}

// requestedVersion reads initialize's params; ok is false when the SDK
// would refuse them (missing, or fields of the wrong type): the agent
// then answers, with its own words.
func requestedVersion(params json.RawMessage) (string, bool) {
	if len(params) == 0 || string(params) == "null" {
		return "", false
	}
	var p struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		ClientInfo      map[string]any `json:"clientInfo"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", false
	}
	return p.ProtocolVersion, true
}

// firstPage reports whether tools/list params ask for the first page: the
// one the starter holds (the agents' tools fit on one).
func firstPage(params json.RawMessage) bool {
	if len(params) == 0 || string(params) == "null" {
		return true
	}
	var p struct {
		Cursor *string `json:"cursor"`
	}
	return json.Unmarshal(params, &p) == nil && (p.Cursor == nil || *p.Cursor == "")
}

// hasMeta reports whether params carry the _meta key.
func hasMeta(params json.RawMessage, name string) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	_, ok := p.Meta[name]
	return ok
}

// progressToken is a tools/call's progress token, nil when none was sent.
func progressToken(params json.RawMessage) json.RawMessage {
	var p struct {
		Meta struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.Meta.Token) == 0 || string(p.Meta.Token) == "null" {
		return nil
	}
	return p.Meta.Token
}

// key names a JSON id or token by its value, as the SDK compares them.
func key(raw json.RawMessage) string {
	var v any
	_ = json.Unmarshal(raw, &v)
	return fmt.Sprintf("%T:%v", v, v)
}

// wireID is an id as the agent's SDK writes it back: numbers as integers,
// strings re-encoded.
func wireID(raw json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	if f, ok := v.(float64); ok {
		return json.RawMessage(strconv.FormatInt(int64(f), 10))
	}
	return encode(v)
}

// refuse answers a message that will never reach the agent: a tool call
// with a tool error (the model reads it and can tell the user), any other
// request with a JSON-RPC error; a notification is dropped.
func (s *session) refuse(m wire.Message, why string) {
	switch {
	case m.ID == nil:
		s.logger.Warn("dropping a notification the agent will not get", "method", m.Method, "why", why)
	case m.Method == "tools/call":
		s.result(m.ID, encode(struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		}{Content: []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{{"text", why}}, IsError: true}))
	default:
		s.errorReply(m.ID, wire.CodeInternalError, why)
	}
}

// reply answers a bad line as the agent's transport does.
func (s *session) reply(p wire.Problem) {
	s.logger.Warn("bad message from client", "code", p.Code, "problem", p.Message)
	s.write(wire.ErrorResponse(p.ID, p.Code, p.Message))
}

func (s *session) errorReply(id json.RawMessage, code int64, message string) {
	s.write(wire.ErrorResponse(wireID(id), code, message))
}

func (s *session) result(id, result json.RawMessage) {
	s.write(encode(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", wireID(id), result}))
}

// write sends one line to the client; lines never interleave.
func (s *session) write(line []byte) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if !bytes.HasSuffix(line, []byte("\n")) {
		line = append(line[:len(line):len(line)], '\n')
	}
	if _, err := s.out.Write(line); err != nil {
		s.logger.Debug("writing to the client failed", "err", err)
	}
}

// encode is JSON as the SDK writes it: no HTML escaping.
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only the types above are encoded
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}
