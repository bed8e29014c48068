package mcpserver

import (
	"github.com/dataworkers/dw/internal/config"
)

// withDemoTime tells the client, on the embedded default, that the agents
// act at the demo's incident time (config.DemoClock), in the instructions
// and then in every answer, so "today" is not mistaken for the wall
// clock's day. It returns a nil note otherwise. b.Clock is the agent's
// own clock (deps.Load made it the demo's on the embedded default), so the
// time said is the time the tools act at.
func withDemoTime(a Agent, b Boot) (Agent, func() string) {
	clk := b.Clock
	if b.ConfigErr != nil || clk == nil || config.DemoTimeNote(clk) == "" {
		return a, nil
	}
	a.Instructions += "\n\nDemo time: with no dw.yaml the agents act on the demo's incident day. It is now " +
		clk.Now().Format("2006-01-02 15:04 MST") + " for them (the clock runs 60 times slower than real time, so the demo stays in its incident hour), " +
		"and \"today\" means that day. Every answer ends its summary with the demo time. Write a dw.yaml (dw config says where) to work on real data at the real time."
	return a, func() string { return config.DemoTimeNote(clk) }
}

// demoNote is the demo-time note for an answer, "" when not on the demo.
func (s *Server) demoNote() string {
	if s == nil || s.note == nil {
		return ""
	}
	return s.note()
}
