package connectors

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/mcpserver"
	"github.com/dataworkers/dw/internal/schemaregister"
)

// A schema_version proposal binds its action (approvals.SchemaVersionAction):
// the subject at the configured registry, with the schema's canonical
// SHA-256 (compat.Canonicalize) and type as its params. That is the
// contract between whoever proposes a schema version (dw-incidents'
// propose_remediation) and register_stream_schema, which carries it out
// and is refused on any difference, named. Because the hash is of the
// canonical form, the schema may be passed in any spelling that parses to
// the same schema. The proposal's kind must be schema_version and its
// class live (approvals forces that for schema versions).
//
// The keys below are the notes dw-incidents also keeps in the proposal's
// details for people (the schema text beside its hash); they decide
// nothing.
const (
	DetailSubject    = "subject"
	DetailSchemaSHA  = "schema_sha256"
	DetailSchemaType = "schema_type"
)

// RegisterSchemaIn is a registration under an approved proposal.
type RegisterSchemaIn struct {
	Subject    string `json:"subject" jsonschema:"subject to register under, e.g. api-usage-value"`
	Schema     string `json:"schema" jsonschema:"the schema text the proposal was approved for (any spelling with the same canonical form)"`
	SchemaType string `json:"schema_type,omitempty" jsonschema:"AVRO (default), JSON or PROTOBUF"`
	ProposalID string `json:"proposal_id" jsonschema:"id of the approved schema_version proposal for exactly this subject and schema, e.g. P-7K3M9QXA"`
}

// RegisterSchemaOut says what was registered and how it was recorded.
type RegisterSchemaOut struct {
	Subject    string `json:"subject" jsonschema:"subject"`
	Version    int    `json:"version" jsonschema:"the subject version that holds the schema"`
	ID         int    `json:"id" jsonschema:"registry-wide schema id"`
	SchemaType string `json:"schema_type" jsonschema:"AVRO, JSON or PROTOBUF"`
	SHA256     string `json:"sha256" jsonschema:"canonical SHA-256 of the schema, as bound in the proposal"`
	// Registered is false when the schema was already there: nothing is
	// done twice.
	Registered    bool            `json:"registered" jsonschema:"true when this call registered the schema; false when it was already registered and nothing was done twice"`
	Proposal      string          `json:"proposal" jsonschema:"the proposal carried out"`
	ProposalState string          `json:"proposal_state" jsonschema:"the proposal's state after the call (executed)"`
	Basis         string          `json:"basis,omitempty" jsonschema:"the approval that allowed the registration"`
	ReceiptID     string          `json:"receipt_id" jsonschema:"receipt recording the proposal and this step (dw receipt show)"`
	StepSeq       int64           `json:"step_seq,omitempty" jsonschema:"position of the receipt step that recorded the registration (the same on a retry)"`
	Change        *RecordedChange `json:"change,omitempty" jsonschema:"the version's entry in the change log"`
	Note          string          `json:"note,omitempty" jsonschema:"what happened, for a person"`
}

var registerSchemaTool = mcpserver.Tool{
	Name:  schemaregister.Tool,
	Title: "Register an approved schema version",
	Description: "Registers a schema version in the Schema Registry only under an approved schema_version proposal for exactly this subject and schema: the proposal is live class, is approved (not pending, expired or rejected), and its bound action names this registry, this subject and the schema's canonical SHA-256 and type. " +
		"The org-wide stop and the domain's autonomy level are checked first, and the approval is claimed in the store so two processes never carry it out twice. Without all of that it refuses, names what differs and whom to ask, and writes nothing. " +
		"On success it records the version in the change log, adds a step to the proposal's receipt and marks the proposal executed. Calling it again for the same schema returns the same version and step without doing anything twice.",
	ReadOnly:    false,
	Destructive: false,
	Idempotent:  true,
	OpenWorld:   true,
	InputSchema: mcpserver.InputSchema[RegisterSchemaIn](func(s *jsonschema.Schema) {
		mcpserver.Enum(s, "schema_type", compat.Kinds...)
	}),
}

func (h *handlers) registerSchema(ctx context.Context, in RegisterSchemaIn) (*RegisterSchemaOut, string, error) {
	r := &schemaregister.Registrar{Sources: h.registrySources(), Approvals: h.approvalService, Store: h.d.Store, Config: h.d.Config}
	res, err := r.Register(ctx, schemaregister.Request{Subject: in.Subject, Schema: in.Schema, SchemaType: in.SchemaType, ProposalID: in.ProposalID})
	if err != nil {
		return nil, "", err
	}
	return &RegisterSchemaOut{
		Subject: res.Subject, Version: res.Version, ID: res.ID, SchemaType: res.SchemaType, SHA256: res.SHA256,
		Registered: res.Registered, Proposal: res.Proposal, ProposalState: res.ProposalState, Basis: res.Basis,
		ReceiptID: res.ReceiptID, StepSeq: res.StepSeq, Change: recordedChange(res.Change), Note: res.Note,
	}, res.Summary, nil
}
