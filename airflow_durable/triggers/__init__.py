"""Our own triggers, only where a provider trigger cannot serve as is (none so far: Databricks defers
to the provider's ``DatabricksExecutionTrigger``)."""
