//! The push-notification configuration shapes of A2A 1.0 (and the 0.3 ones JSON-RPC
//! also reads): a webhook for a task, the token it is sent, and how the server
//! authenticates to it. `Debug` never shows the token or the credentials, and what the
//! server answers with carries neither ([`TaskPushNotificationConfig::redacted`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::fmt;

/// Shown in place of a secret.
const HIDDEN: &str = "<redacted>";

/// How the server authenticates to a webhook: `Authorization: <scheme> <credentials>`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationInfo {
    /// The HTTP authentication scheme (`Bearer`, `Basic`, …).
    #[serde(default)]
    pub scheme: String,
    /// The credentials sent with the scheme; never echoed back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

impl fmt::Debug for AuthenticationInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthenticationInfo")
            .field("scheme", &self.scheme)
            .field("credentials", &self.credentials.as_ref().map(|_| HIDDEN))
            .finish()
    }
}

/// A webhook for a task's updates (A2A 1.0 `TaskPushNotificationConfig`).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    /// The tenant (unused here).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The config's id within its task; the task's id when empty.
    #[serde(default)]
    pub id: String,
    /// The task.
    #[serde(default)]
    pub task_id: String,
    /// Where the updates are POSTed (http or https).
    #[serde(default)]
    pub url: String,
    /// Sent as `X-A2A-Notification-Token` with every update, for the receiver to check;
    /// never echoed back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// How the server authenticates to the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

impl fmt::Debug for TaskPushNotificationConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskPushNotificationConfig")
            .field("id", &self.id)
            .field("task_id", &self.task_id)
            .field("url", &super::webhook::shown_url(&self.url))
            .field("token", &self.token.as_ref().map(|_| HIDDEN))
            .field("authentication", &self.authentication)
            .finish()
    }
}

impl TaskPushNotificationConfig {
    /// The config as the server answers with it: without its token and credentials (the
    /// client that set them has them; nobody else needs them).
    pub fn redacted(&self) -> Self {
        TaskPushNotificationConfig {
            token: None,
            authentication: self
                .authentication
                .as_ref()
                .map(|a| AuthenticationInfo { scheme: a.scheme.clone(), credentials: None }),
            ..self.clone()
        }
    }
}

/// The params of `GetTaskPushNotificationConfig` and `DeleteTaskPushNotificationConfig`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigRequest {
    /// The task.
    #[serde(default)]
    pub task_id: String,
    /// The config.
    #[serde(default)]
    pub id: String,
}

/// The params of `ListTaskPushNotificationConfigs`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsRequest {
    /// The task.
    #[serde(default)]
    pub task_id: String,
}

/// What `ListTaskPushNotificationConfigs` answers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsResponse {
    /// The task's configs, redacted, oldest first.
    pub configs: Vec<TaskPushNotificationConfig>,
    /// Always empty: one page holds them all.
    #[serde(default)]
    pub next_page_token: String,
}

/// The 0.3 forms (`tasks/pushNotificationConfig/…`): the config nested as
/// `pushNotificationConfig`, authentication as a list of `schemes`, and the task named
/// `id` in the get, list and delete params.
pub mod legacy {
    use super::*;

    fn text(value: &Value, key: &str) -> Option<String> {
        value.get(key).and_then(Value::as_str).map(str::to_owned)
    }

    /// A 0.3 `TaskPushNotificationConfig` (`{taskId, pushNotificationConfig: {…}}`) as the
    /// 1.0 config; `None` when it is not one.
    pub fn read(params: &Value) -> Option<TaskPushNotificationConfig> {
        let nested = params.get("pushNotificationConfig")?;
        let authentication = nested.get("authentication").map(|auth| AuthenticationInfo {
            scheme: auth
                .get("schemes")
                .and_then(Value::as_array)
                .and_then(|schemes| schemes.first())
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            credentials: text(auth, "credentials"),
        });
        Some(TaskPushNotificationConfig {
            id: text(nested, "id").unwrap_or_default(),
            task_id: text(params, "taskId").unwrap_or_default(),
            url: text(nested, "url").unwrap_or_default(),
            token: text(nested, "token"),
            authentication,
            ..TaskPushNotificationConfig::default()
        })
    }

    /// The task and config ids of 0.3 get / delete params (`{id, pushNotificationConfigId}`).
    pub fn ids(params: &Value) -> PushConfigRequest {
        PushConfigRequest {
            task_id: text(params, "id").unwrap_or_default(),
            id: text(params, "pushNotificationConfigId").unwrap_or_default(),
        }
    }

    /// A (redacted) config in the 0.3 form.
    pub fn render(config: &TaskPushNotificationConfig) -> Value {
        let mut nested = Map::new();
        nested.insert("id".into(), json!(config.id));
        nested.insert("url".into(), json!(config.url));
        if let Some(auth) = &config.authentication {
            nested.insert("authentication".into(), json!({"schemes": [auth.scheme]}));
        }
        json!({"taskId": config.task_id, "pushNotificationConfig": nested})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret_config() -> TaskPushNotificationConfig {
        TaskPushNotificationConfig {
            id: "hook".into(),
            task_id: "run_1".into(),
            url: "https://user:pw@hooks.example.com/in?key=k3y".into(),
            token: Some("t0ken".into()),
            authentication: Some(AuthenticationInfo { scheme: "Bearer".into(), credentials: Some("cr3d".into()) }),
            ..TaskPushNotificationConfig::default()
        }
    }

    #[test]
    fn secrets_stay_out_of_debug_and_answers() {
        let config = secret_config();
        let shown = format!("{config:?}");
        for secret in ["t0ken", "cr3d", "pw", "k3y"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        let answered = serde_json::to_value(config.redacted()).expect("serializes");
        assert!(answered.get("token").is_none());
        assert_eq!(answered["authentication"], json!({"scheme": "Bearer"}));
        assert_eq!(answered["taskId"], "run_1");
    }

    #[test]
    fn the_0_3_forms_read_and_render() {
        let read = legacy::read(&json!({"taskId": "run_1", "pushNotificationConfig": {
            "url": "http://h/in", "token": "t", "authentication": {"schemes": ["Basic"], "credentials": "c"}}}))
        .expect("a 0.3 config");
        assert_eq!(
            (read.task_id.as_str(), read.url.as_str(), read.token.as_deref()),
            ("run_1", "http://h/in", Some("t"))
        );
        assert_eq!(
            read.authentication,
            Some(AuthenticationInfo { scheme: "Basic".into(), credentials: Some("c".into()) })
        );
        let rendered = legacy::render(&read.redacted());
        assert_eq!(rendered["pushNotificationConfig"]["authentication"], json!({"schemes": ["Basic"]}));
        assert!(rendered["pushNotificationConfig"].get("token").is_none());
        assert_eq!(legacy::ids(&json!({"id": "run_1", "pushNotificationConfigId": "p"})).id, "p");
    }
}
