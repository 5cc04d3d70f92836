package posture

import "time"

// Kind names a collection of entities. It is the collection's path segment
// in the APIs ("identities", "posture-checks") and the prefix of its keys in
// the projections.
type Kind string

// The kinds of entities the model holds.
const (
	KindIdentity                = Kind("identities")
	KindAuthenticator           = Kind("authenticators")
	KindCheck                   = Kind("posture-checks")
	KindService                 = Kind("services")
	KindConfig                  = Kind("configs")
	KindConfigType              = Kind("config-types")
	KindServicePolicy           = Kind("service-policies")
	KindEdgeRouter              = Kind("edge-routers")
	KindEdgeRouterPolicy        = Kind("edge-router-policies")
	KindServiceEdgeRouterPolicy = Kind("service-edge-router-policies")
	KindExternalJWTSigner       = Kind("external-jwt-signers")
)

// eventNames are the singular names that prefix a kind's event types.
var eventNames = map[Kind]string{
	KindIdentity:                "identity",
	KindAuthenticator:           "authenticator",
	KindCheck:                   "check",
	KindService:                 "service",
	KindConfig:                  "config",
	KindConfigType:              "config-type",
	KindServicePolicy:           "service-policy",
	KindEdgeRouter:              "edge-router",
	KindEdgeRouterPolicy:        "edge-router-policy",
	KindServiceEdgeRouterPolicy: "service-edge-router-policy",
	KindExternalJWTSigner:       "external-jwt-signer",
	KindCA:                      "ca",
	KindEnrollment:              "enrollment",
	KindWebhook:                 "webhook",
}

// Entity is a record of the model: something an administrator creates,
// updates and deletes.
type Entity interface {
	EntityKind() Kind
	EntityID() string
}

// Created records a new entity.
type Created[T Entity] struct {
	Entity T `json:"entity"`
}

// Updated records the whole new state of an entity.
type Updated[T Entity] struct {
	Entity T `json:"entity"`
}

// Deleted records the removal of an entity.
type Deleted[T Entity] struct {
	ID string `json:"id"`
}

func kindOf[T Entity]() Kind {
	var zero T
	return zero.EntityKind()
}

func (Created[T]) EventType() string { return eventNames[kindOf[T]()] + ".created" }
func (Updated[T]) EventType() string { return eventNames[kindOf[T]()] + ".updated" }
func (Deleted[T]) EventType() string { return eventNames[kindOf[T]()] + ".deleted" }
func (Created[T]) Subject() string   { return SubjectModel }
func (Updated[T]) Subject() string   { return SubjectModel }
func (Deleted[T]) Subject() string   { return SubjectModel }

func registerEntity[T Entity]() {
	register(Created[T]{}, Updated[T]{}, Deleted[T]{})
}

func init() {
	registerEntity[Identity]()
	registerEntity[Authenticator]()
	registerEntity[Check]()
	registerEntity[Service]()
	registerEntity[Config]()
	registerEntity[ConfigType]()
	registerEntity[ServicePolicy]()
	registerEntity[EdgeRouter]()
	registerEntity[EdgeRouterPolicy]()
	registerEntity[ServiceEdgeRouterPolicy]()
	registerEntity[ExternalJWTSigner]()
	registerEntity[CA]()
	registerEntity[Enrollment]()
}

func (e Identity) EntityKind() Kind                { return KindIdentity }
func (e Identity) EntityID() string                { return e.ID }
func (e Authenticator) EntityKind() Kind           { return KindAuthenticator }
func (e Authenticator) EntityID() string           { return e.ID }
func (e Check) EntityKind() Kind                   { return KindCheck }
func (e Check) EntityID() string                   { return e.ID }
func (e Service) EntityKind() Kind                 { return KindService }
func (e Service) EntityID() string                 { return e.ID }
func (e Config) EntityKind() Kind                  { return KindConfig }
func (e Config) EntityID() string                  { return e.ID }
func (e ConfigType) EntityKind() Kind              { return KindConfigType }
func (e ConfigType) EntityID() string              { return e.ID }
func (e ServicePolicy) EntityKind() Kind           { return KindServicePolicy }
func (e ServicePolicy) EntityID() string           { return e.ID }
func (e EdgeRouter) EntityKind() Kind              { return KindEdgeRouter }
func (e EdgeRouter) EntityID() string              { return e.ID }
func (e EdgeRouterPolicy) EntityKind() Kind        { return KindEdgeRouterPolicy }
func (e EdgeRouterPolicy) EntityID() string        { return e.ID }
func (e ServiceEdgeRouterPolicy) EntityKind() Kind { return KindServiceEdgeRouterPolicy }
func (e ServiceEdgeRouterPolicy) EntityID() string { return e.ID }
func (e ExternalJWTSigner) EntityKind() Kind       { return KindExternalJWTSigner }
func (e ExternalJWTSigner) EntityID() string       { return e.ID }

// Attributed is an entity with role attributes, which roles ("#attr",
// "@id") select.
type Attributed interface {
	Entity
	Attributes() []string
}

func (e Identity) Attributes() []string   { return e.RoleAttributes }
func (e Check) Attributes() []string      { return e.RoleAttributes }
func (e Service) Attributes() []string    { return e.RoleAttributes }
func (e EdgeRouter) Attributes() []string { return e.RoleAttributes }

// Service is a network service that policies grant access to.
type Service struct {
	ID                 string    `json:"id"`
	Name               string    `json:"name"`
	RoleAttributes     []string  `json:"roleAttributes"`
	Configs            []string  `json:"configs"`
	EncryptionRequired bool      `json:"encryptionRequired"`
	MaxIdleTimeMillis  int64     `json:"maxIdleTimeMillis"`
	TerminatorStrategy string    `json:"terminatorStrategy"`
	Tags               Tags      `json:"tags"`
	CreatedAt          time.Time `json:"createdAt"`
	UpdatedAt          time.Time `json:"updatedAt"`
}

// ConfigType names and shapes configurations of services.
type ConfigType struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Schema    map[string]any `json:"schema"`
	Tags      Tags           `json:"tags"`
	CreatedAt time.Time      `json:"createdAt"`
	UpdatedAt time.Time      `json:"updatedAt"`
}

// Config is a configuration of a config type that services refer to.
type Config struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	ConfigTypeID string         `json:"configTypeId"`
	Data         map[string]any `json:"data"`
	Tags         Tags           `json:"tags"`
	CreatedAt    time.Time      `json:"createdAt"`
	UpdatedAt    time.Time      `json:"updatedAt"`
}

// Policy types.
const (
	Dial = "Dial"
	Bind = "Bind"
)

// OtherType is the policy type that is not t (Dial for Bind, Bind for
// Dial).
func OtherType(t string) string {
	if t == Dial {
		return Bind
	}
	return Dial
}

// ServicePolicy grants identities Dial or Bind access to services, subject
// to posture checks. Roles are "#attribute", "@id" or "#all".
type ServicePolicy struct {
	ID                string    `json:"id"`
	Name              string    `json:"name"`
	Type              string    `json:"type"`
	Semantic          string    `json:"semantic"`
	IdentityRoles     []string  `json:"identityRoles"`
	ServiceRoles      []string  `json:"serviceRoles"`
	PostureCheckRoles []string  `json:"postureCheckRoles"`
	Tags              Tags      `json:"tags"`
	CreatedAt         time.Time `json:"createdAt"`
	UpdatedAt         time.Time `json:"updatedAt"`
}

// EdgeRouter is a data-plane router. postured has no data plane: routers
// are records that policies select.
type EdgeRouter struct {
	ID                string    `json:"id"`
	Name              string    `json:"name"`
	RoleAttributes    []string  `json:"roleAttributes"`
	IsTunnelerEnabled bool      `json:"isTunnelerEnabled"`
	Cost              int64     `json:"cost"`
	NoTraversal       bool      `json:"noTraversal"`
	Disabled          bool      `json:"disabled"`
	Hostname          string    `json:"hostname"`
	AppData           Tags      `json:"appData"`
	Tags              Tags      `json:"tags"`
	CreatedAt         time.Time `json:"createdAt"`
	UpdatedAt         time.Time `json:"updatedAt"`
	RouterEnrollment            // enrollment token and certificates (enrollment.go)
}

// EdgeRouterPolicy grants identities the use of edge routers.
type EdgeRouterPolicy struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	Semantic        string    `json:"semantic"`
	IdentityRoles   []string  `json:"identityRoles"`
	EdgeRouterRoles []string  `json:"edgeRouterRoles"`
	Tags            Tags      `json:"tags"`
	CreatedAt       time.Time `json:"createdAt"`
	UpdatedAt       time.Time `json:"updatedAt"`
}

// ServiceEdgeRouterPolicy permits edge routers to carry services.
type ServiceEdgeRouterPolicy struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	Semantic        string    `json:"semantic"`
	ServiceRoles    []string  `json:"serviceRoles"`
	EdgeRouterRoles []string  `json:"edgeRouterRoles"`
	Tags            Tags      `json:"tags"`
	CreatedAt       time.Time `json:"createdAt"`
	UpdatedAt       time.Time `json:"updatedAt"`
}
