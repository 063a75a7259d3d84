// spec.rollout and status.rollout: how a new version of the model server reaches the pods (a
// rolling update, today's behaviour, or a canary judged step by step by its own metrics), its
// schema, its CEL rules and their messages, and Validate's repetition of them.

package crd

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// Rollout is spec.rollout: how a change of the model server's version is rolled out.
type Rollout struct {
	// Strategy is RolloutRollingUpdate (the default: the Deployment's own rolling update) or
	// RolloutCanary.
	Strategy string `json:"strategy,omitempty"`
	// Steps are the canary's traffic weights and how long each is judged; weights strictly
	// increase. Required with Canary.
	Steps []RolloutStep `json:"steps,omitempty"`
	// CanaryReplicas is the canary Deployment's pods; default DefaultCanaryReplicas.
	CanaryReplicas *int32 `json:"canaryReplicas,omitempty"`
	// Analysis are the thresholds each step is judged by.
	Analysis *RolloutAnalysis `json:"analysis,omitempty"`
}

// RolloutStep is one step of a canary: Weight percent of the route's requests to the canary
// for DurationSeconds, judged at its end.
type RolloutStep struct {
	Weight          int32 `json:"weight"`
	DurationSeconds int32 `json:"durationSeconds"`
}

// RolloutAnalysis are the thresholds a canary step passes, each with its default.
type RolloutAnalysis struct {
	// MaxErrorRatePercent is the most of the canary's requests that may answer 5xx in a step.
	MaxErrorRatePercent *int32 `json:"maxErrorRatePercent,omitempty"`
	// MaxTTFTIncreasePercent is how much the canary's p95 time to first token may exceed the
	// stable's in the same step, in percent of the stable's.
	MaxTTFTIncreasePercent *int32 `json:"maxTTFTIncreasePercent,omitempty"`
	// MinRequests is how many requests the canary must answer in a step for it to be judged.
	MinRequests *int32 `json:"minRequests,omitempty"`
}

// Rollout strategies.
const (
	RolloutRollingUpdate = "RollingUpdate"
	RolloutCanary        = "Canary"
)

// Defaults and bounds of spec.rollout.
const (
	DefaultCanaryReplicas         = 1
	DefaultMaxErrorRatePercent    = 5
	DefaultMaxTTFTIncreasePercent = 50
	DefaultMinRequests            = 20
	MaxRolloutSteps               = 10
	MinStepDurationSeconds        = 30
	MaxStepDurationSeconds        = 3600
	// InconclusiveFactor: a step without MinRequests requests waits up to this many times its
	// duration, then fails as inconclusive.
	InconclusiveFactor = 3
)

// IsCanary reports whether r rolls versions out as a canary.
func (r *Rollout) IsCanary() bool { return r != nil && r.Strategy == RolloutCanary }

// Replicas is spec.rollout.canaryReplicas with its default.
func (r *Rollout) Replicas() int32 {
	if r == nil || r.CanaryReplicas == nil {
		return DefaultCanaryReplicas
	}
	return *r.CanaryReplicas
}

// Thresholds are the analysis' thresholds with their defaults: error rate and TTFT increase
// in percent, and the fewest requests a step is judged on.
func (r *Rollout) Thresholds() (maxErrorRate, maxTTFTIncrease, minRequests int32) {
	maxErrorRate, maxTTFTIncrease, minRequests = DefaultMaxErrorRatePercent, DefaultMaxTTFTIncreasePercent, DefaultMinRequests
	if r == nil || r.Analysis == nil {
		return
	}
	a := r.Analysis
	maxErrorRate = ptr.Deref(a.MaxErrorRatePercent, maxErrorRate)
	maxTTFTIncrease = ptr.Deref(a.MaxTTFTIncreasePercent, maxTTFTIncrease)
	minRequests = ptr.Deref(a.MinRequests, minRequests)
	return
}

// RolloutStatus is status.rollout: the last canary rollout, in progress or done. It is the
// rollout's whole state, so an operator restarted mid-rollout resumes at the same step.
type RolloutStatus struct {
	// Phase is RolloutProgressing, RolloutPromoted or RolloutRolledBack.
	Phase string `json:"phase"`
	// Step is the step in progress (1-based) or the one the rollout ended at; Steps the count.
	Step  int32 `json:"step,omitempty"`
	Steps int32 `json:"steps,omitempty"`
	// Weight is the percent of the route's requests the canary gets now.
	Weight int32 `json:"weight"`
	// StableRevision and CanaryRevision are the model server templates' revisions (RevisionOf).
	StableRevision string `json:"stableRevision,omitempty"`
	CanaryRevision string `json:"canaryRevision,omitempty"`
	// StepStartedAt is when the current step's window began (RFC 3339); empty until the
	// canary's pods are ready and its traffic shifted.
	StepStartedAt string `json:"stepStartedAt,omitempty"`
	// Message says where the rollout is and, at its end, which number decided it.
	Message string `json:"message,omitempty"`
	// FailedRevision is the revision a rollback refused: the same spec is not tried again.
	FailedRevision string `json:"failedRevision,omitempty"`
}

// Phases of status.rollout.
const (
	RolloutProgressing = "Progressing"
	RolloutPromoted    = "Promoted"
	RolloutRolledBack  = "RolledBack"
)

// ConditionRollout is a canary rollout's condition: True with reason Promoted, False with
// RolledBack, Unknown with Progressing or StepPassed while it runs; absent without one.
const ConditionRollout = "Rollout"

// CEL rules of spec.rollout and their messages.
const (
	ruleCanary                   = `has(self.rollout) && has(self.rollout.strategy) && self.rollout.strategy == 'Canary'`
	RuleRolloutSteps             = `!has(self.strategy) || self.strategy != 'Canary' || (has(self.steps) && size(self.steps) >= 1)`
	RuleRolloutStepsMsg          = "spec.rollout.steps: a Canary rollout needs at least one step ({weight: percent of requests to the canary, durationSeconds: how long before it is judged})"
	RuleRolloutIncreasing        = `[1, 2, 3, 4, 5, 6, 7, 8, 9].all(i, i >= size(self) || self[i - 1].weight < self[i].weight)`
	RuleRolloutIncreasingMsg     = "spec.rollout.steps: weights must strictly increase from step to step"
	RuleRolloutNeedsGateway      = `!(` + ruleCanary + `) || has(self.gateway)`
	RuleRolloutNeedsGatewayMsg   = "spec.rollout.strategy Canary needs spec.gateway: the canary's share of requests is a weight on the model's HTTPRoute"
	RuleRolloutNotMultiNode      = `!(` + ruleCanary + `) || !has(self.multiNode)`
	RuleRolloutNotMultiNodeMsg   = "spec.rollout.strategy Canary is not supported with spec.multiNode: use strategy RollingUpdate"
	RuleRolloutNotScaleToZero    = `!(` + ruleCanary + `) || ((!has(self.replicas) || self.replicas >= 1) && (!has(self.autoscaling) || self.autoscaling.minReplicas >= 1))`
	RuleRolloutNotScaleToZeroMsg = "spec.rollout.strategy Canary is not supported with scale to zero (spec.replicas 0 or spec.autoscaling.minReplicas 0): a canary is judged against a stable that serves; set at least 1"
)

// rolloutSpecRules are spec.rollout's rules that read other spec fields.
func rolloutSpecRules() apiextensionsv1.ValidationRules {
	return apiextensionsv1.ValidationRules{
		{Rule: RuleRolloutNeedsGateway, Message: RuleRolloutNeedsGatewayMsg, FieldPath: ".rollout"},
		{Rule: RuleRolloutNotMultiNode, Message: RuleRolloutNotMultiNodeMsg, FieldPath: ".rollout"},
		{Rule: RuleRolloutNotScaleToZero, Message: RuleRolloutNotScaleToZeroMsg, FieldPath: ".rollout"},
	}
}

func rolloutSchema() apiextensionsv1.JSONSchemaProps {
	i32 := func(desc string, lo, hi float64) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Description: desc, Minimum: &lo, Maximum: &hi}
	}
	return apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Description: "How a new version of the model server (a change of spec.image, spec.baseModel, spec.engineArgs, spec.env, the weights' source or anything else of the pods' template) is rolled out. RollingUpdate (the default) is the Deployment's rolling update. " +
			"Canary runs the new version beside the old (a Deployment NAME-canary and Service NAME-canary), gives it each step's weight of the HTTPRoute's requests for the step's duration, and at the step's end compares it with the stable pods on error rate and p95 time to first token, read from both sides' own /metrics: every step passed promotes it (the stable Deployment is updated, then the canary removed); one step failed rolls it back at once (all requests to the stable, the canary removed, status.rollout.failedRevision set so the same spec is not tried again). Needs spec.gateway; not with spec.multiNode or scale to zero.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"strategy": {Type: "string", Enum: enumOf(RolloutRollingUpdate, RolloutCanary), Default: &apiextensionsv1.JSON{Raw: []byte(`"` + RolloutRollingUpdate + `"`)},
				Description: "RollingUpdate (the default) or Canary."},
			"steps": {
				Type: "array", MaxItems: ptr.To[int64](MaxRolloutSteps),
				Description: fmt.Sprintf("The canary's steps, 1 to %d, weights strictly increasing: each gives the canary weight percent of the requests for durationSeconds, then judges it. A step whose canary answered fewer than analysis.minRequests waits, up to %d times its duration, then fails as inconclusive.", MaxRolloutSteps, InconclusiveFactor),
				Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Required: []string{"weight", "durationSeconds"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"weight":          i32("Percent of the route's requests to the canary, 1 to 99.", 1, 99),
						"durationSeconds": i32(fmt.Sprintf("Seconds the step lasts before it is judged, %d to %d.", MinStepDurationSeconds, MaxStepDurationSeconds), MinStepDurationSeconds, MaxStepDurationSeconds),
					},
				}},
				XValidations: apiextensionsv1.ValidationRules{{Rule: RuleRolloutIncreasing, Message: RuleRolloutIncreasingMsg}},
			},
			"canaryReplicas": i32(fmt.Sprintf("Pods of the canary's Deployment, default %d; the HPA keeps scaling the stable only.", DefaultCanaryReplicas), 1, MaxReplicas),
			"analysis": {
				Type:        "object",
				Description: "The thresholds every step is judged by, canary against stable over the step's window.",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"maxErrorRatePercent":    i32(fmt.Sprintf("Most of the canary's requests that may answer 5xx (vLLM's http_requests_total), in percent; default %d.", DefaultMaxErrorRatePercent), 0, 100),
					"maxTTFTIncreasePercent": i32(fmt.Sprintf("How much the canary's p95 time to first token may exceed the stable's, in percent of the stable's; default %d.", DefaultMaxTTFTIncreasePercent), 0, 1000),
					"minRequests":            i32(fmt.Sprintf("Fewest requests the canary must answer in a step to be judged; default %d.", DefaultMinRequests), 1, 1000000),
				},
			},
		},
		XValidations: apiextensionsv1.ValidationRules{{Rule: RuleRolloutSteps, Message: RuleRolloutStepsMsg}},
	}
}

func rolloutStatusSchema() apiextensionsv1.JSONSchemaProps {
	str := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
	}
	i32 := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Description: desc}
	}
	return apiextensionsv1.JSONSchemaProps{
		Type: "object", Description: "The last canary rollout (spec.rollout.strategy Canary), running or done: its state, from which a restarted operator resumes it.",
		Required: []string{"phase"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"phase":          {Type: "string", Enum: enumOf(RolloutProgressing, RolloutPromoted, RolloutRolledBack), Description: "Progressing, Promoted or RolledBack."},
			"step":           i32("The step in progress (1-based), or the one the rollout ended at."),
			"steps":          i32("The rollout's steps."),
			"weight":         i32("Percent of the route's requests the canary gets now."),
			"stableRevision": str("The stable pods' template revision."),
			"canaryRevision": str("The canary pods' template revision."),
			"stepStartedAt":  str("When the current step's window began (RFC 3339)."),
			"message":        str("Where the rollout is, and which number decided it."),
			"failedRevision": str("The revision a rollback refused; the same spec is not tried again, a new change starts a new rollout."),
		},
	}
}

// rolloutErrors repeats spec.rollout's schema and CEL rules.
func rolloutErrors(isvc *InferenceService, e *SpecExtensions) []string {
	r := e.Rollout
	if r == nil {
		return nil
	}
	var errs []string
	if r.Strategy != "" && r.Strategy != RolloutRollingUpdate && r.Strategy != RolloutCanary {
		errs = append(errs, fmt.Sprintf("spec.rollout.strategy %q must be RollingUpdate or Canary", r.Strategy))
	}
	if len(r.Steps) > MaxRolloutSteps {
		errs = append(errs, fmt.Sprintf("spec.rollout.steps: at most %d steps", MaxRolloutSteps))
	}
	for i, s := range r.Steps {
		if s.Weight < 1 || s.Weight > 99 {
			errs = append(errs, fmt.Sprintf("spec.rollout.steps[%d].weight %d must be between 1 and 99", i, s.Weight))
		}
		if s.DurationSeconds < MinStepDurationSeconds || s.DurationSeconds > MaxStepDurationSeconds {
			errs = append(errs, fmt.Sprintf("spec.rollout.steps[%d].durationSeconds %d must be between %d and %d", i, s.DurationSeconds, MinStepDurationSeconds, MaxStepDurationSeconds))
		}
		if i > 0 && s.Weight <= r.Steps[i-1].Weight {
			errs = append(errs, RuleRolloutIncreasingMsg)
		}
	}
	if c := r.CanaryReplicas; c != nil && (*c < 1 || *c > MaxReplicas) {
		errs = append(errs, fmt.Sprintf("spec.rollout.canaryReplicas %d must be between 1 and %d", *c, MaxReplicas))
	}
	if !r.IsCanary() {
		return errs
	}
	if len(r.Steps) == 0 {
		errs = append(errs, RuleRolloutStepsMsg)
	}
	if e.Gateway == nil {
		errs = append(errs, RuleRolloutNeedsGatewayMsg)
	}
	if e.MultiNode != nil {
		errs = append(errs, RuleRolloutNotMultiNodeMsg)
	}
	if (e.Autoscaling != nil && e.Autoscaling.MinReplicas < 1) || (e.Autoscaling == nil && isvc.Spec.Replicas < 1) {
		errs = append(errs, RuleRolloutNotScaleToZeroMsg)
	}
	return errs
}

// DeepCopy copies r deeply; nil for nil.
func (r *Rollout) DeepCopy() *Rollout {
	if r == nil {
		return nil
	}
	out := *r
	out.Steps = append([]RolloutStep(nil), r.Steps...)
	out.CanaryReplicas = clonePtr(r.CanaryReplicas)
	if a := r.Analysis; a != nil {
		out.Analysis = &RolloutAnalysis{MaxErrorRatePercent: clonePtr(a.MaxErrorRatePercent),
			MaxTTFTIncreasePercent: clonePtr(a.MaxTTFTIncreasePercent), MinRequests: clonePtr(a.MinRequests)}
	}
	return &out
}
