//! People and groups: who a platform identity is, whatever channel it answers from.
//!
//! A [`Person`] has a name and identities on channels (a channel's name and the id the
//! channel knows the person by: a Telegram user id, a Feishu open_id or user_id, a Slack
//! user id, a webhook sender name, an operator token's label). Answers and refusals are
//! recorded under the person's name whatever channel was used. An identity that belongs to
//! nobody is a person of its own, named by its bare id: channel-level approver lists keep
//! working unchanged.
//!
//! Groups are named sets of people; [`People::expand`] turns a list of people and groups
//! (a route's approvers, say) into [`Approvers`], the set of people it names.
//!
//! Pure data: configuration builds it with [`People::new`], the registry holds it, and the
//! channels ask it through the registry.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use super::quiet::QuietHours;

/// One identity: the channel's name (`telegram`, `feishu`, `slack`, `webhook`, `operator`)
/// and the id that channel knows the person by.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// The channel's name.
    pub channel: String,
    /// The id on that channel.
    pub id: String,
}

impl Identity {
    /// An identity on `channel`.
    pub fn new(channel: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            channel: channel.into(),
            id: id.into(),
        }
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.channel, self.id)
    }
}

/// A person as given, before [`People::new`] checks them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PersonSpec {
    /// The name answers are recorded under.
    pub name: String,
    /// Their identities on channels.
    pub identities: Vec<Identity>,
    /// The groups they belong to (besides any group listing them).
    pub groups: Vec<String>,
    /// When their phone is left alone.
    pub quiet: Option<QuietHours>,
}

/// A group as given: a name and the people in it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupSpec {
    /// The group's name.
    pub name: String,
    /// The names of the people in it.
    pub members: Vec<String>,
}

/// Why people or groups were refused: the field (`people[1].telegram[0]`) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PeopleError {
    /// Where: `people[k]...` or `groups[k]...`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

fn refuse(field: impl Into<String>, message: impl Into<String>) -> PeopleError {
    PeopleError {
        field: field.into(),
        message: message.into(),
    }
}

/// A person, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Person {
    name: String,
    identities: Vec<Identity>,
    groups: BTreeSet<String>,
    quiet: Option<QuietHours>,
}

impl Person {
    /// Their quiet hours, if they set any.
    pub fn quiet(&self) -> Option<&QuietHours> {
        self.quiet.as_ref()
    }

    /// Their name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Their identities, in the order given.
    pub fn identities(&self) -> &[Identity] {
        &self.identities
    }

    /// Their ids on `channel`.
    pub fn ids_on<'a>(&'a self, channel: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.identities
            .iter()
            .filter(move |i| i.channel == channel)
            .map(|i| i.id.as_str())
    }

    /// The groups they belong to.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.iter().map(String::as_str)
    }
}

/// The people and groups, checked: every name unique, every identity belonging to one
/// person, every group member known.
#[derive(Clone, Debug, Default)]
pub struct People {
    people: Vec<Person>,
    by_name: HashMap<String, usize>,
    by_identity: HashMap<Identity, usize>,
    /// Group name -> the indexes of its members.
    groups: BTreeMap<String, BTreeSet<usize>>,
}

/// The longest name a person or group may have.
pub const MAX_NAME_CHARS: usize = 64;

fn check_name(field: &str, name: &str) -> Result<(), PeopleError> {
    if name.trim().is_empty() {
        return Err(refuse(field, "is empty: give a name such as \"alice\""));
    }
    if name.trim() != name || name.chars().any(char::is_control) {
        return Err(refuse(
            field,
            format!("{name:?} has spaces at its ends or control characters"),
        ));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(refuse(
            field,
            format!("is longer than {MAX_NAME_CHARS} characters"),
        ));
    }
    Ok(())
}

impl People {
    /// Checks `people` and `groups`; the error names the entry and what to change.
    pub fn new(people: Vec<PersonSpec>, groups: Vec<GroupSpec>) -> Result<Self, PeopleError> {
        let mut out = People::default();
        for (k, p) in people.into_iter().enumerate() {
            let field = format!("people[{k}]");
            check_name(&format!("{field}.name"), &p.name)?;
            if out.by_name.contains_key(&p.name) {
                return Err(refuse(
                    format!("{field}.name"),
                    format!("{:?} is the name of an earlier person", p.name),
                ));
            }
            let index = out.people.len();
            for (j, identity) in p.identities.iter().enumerate() {
                let at = format!("{field}.{}[{j}]", identity.channel);
                if identity.id.trim().is_empty() {
                    return Err(refuse(at, "is empty"));
                }
                if let Some(&other) = out.by_identity.get(identity) {
                    let other = &out.people[other].name;
                    return Err(refuse(
                        at,
                        format!(
                            "{:?} is already {other:?}'s: an identity belongs to one person",
                            identity.id
                        ),
                    ));
                }
                out.by_identity.insert(identity.clone(), index);
            }
            for (j, g) in p.groups.iter().enumerate() {
                check_name(&format!("{field}.groups[{j}]"), g)?;
                out.groups.entry(g.clone()).or_default().insert(index);
            }
            out.by_name.insert(p.name.clone(), index);
            out.people.push(Person {
                name: p.name,
                identities: p.identities,
                groups: p.groups.into_iter().collect(),
                quiet: p.quiet,
            });
        }
        let mut declared = BTreeSet::new();
        for (k, g) in groups.into_iter().enumerate() {
            let field = format!("groups[{k}]");
            check_name(&format!("{field}.name"), &g.name)?;
            if !declared.insert(g.name.clone()) {
                return Err(refuse(
                    format!("{field}.name"),
                    format!("{:?} is the name of an earlier group", g.name),
                ));
            }
            let entry = out.groups.entry(g.name.clone()).or_default();
            for (j, m) in g.members.iter().enumerate() {
                let Some(&index) = out.by_name.get(m) else {
                    return Err(refuse(
                        format!("{field}.members[{j}]"),
                        format!("{m:?} is not a person: add a [[people]] entry with this name"),
                    ));
                };
                entry.insert(index);
            }
            for &index in entry.iter() {
                out.people[index].groups.insert(g.name.clone());
            }
        }
        for (name, _) in out.groups.iter() {
            if out.by_name.contains_key(name) {
                return Err(refuse(
                    "groups",
                    format!("{name:?} names both a person and a group: give them different names"),
                ));
            }
        }
        Ok(out)
    }

    /// Whether no person is configured.
    pub fn is_empty(&self) -> bool {
        self.people.is_empty()
    }

    /// Every person, in the order given.
    pub fn people(&self) -> &[Person] {
        &self.people
    }

    /// The person named `name`.
    pub fn person(&self, name: &str) -> Option<&Person> {
        self.by_name.get(name).map(|&i| &self.people[i])
    }

    /// The names of the groups, sorted.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    /// The members of group `name`, when there is one.
    pub fn members(&self, name: &str) -> Option<impl Iterator<Item = &Person>> {
        self.groups
            .get(name)
            .map(|m| m.iter().map(|&i| &self.people[i]))
    }

    /// Whether `name` is a person or a group.
    pub fn knows(&self, name: &str) -> bool {
        self.by_name.contains_key(name) || self.groups.contains_key(name)
    }

    /// The person whose identity on `channel` is `id`.
    pub fn identify(&self, channel: &str, id: &str) -> Option<&Person> {
        // The lookup key is owned; identities are short.
        let key = Identity::new(channel, id);
        self.by_identity.get(&key).map(|&i| &self.people[i])
    }

    /// The name an answer from `id` on `channel` is recorded under: the person's, or `None`
    /// when the identity is nobody's (it is then a person of its own, named as the channel
    /// names it).
    pub fn name_of(&self, channel: &str, id: &str) -> Option<&str> {
        self.identify(channel, id).map(Person::name)
    }

    /// The people `names` (people and groups) name, or the first name that is neither.
    pub fn expand<S: AsRef<str>>(&self, names: &[S]) -> Result<Approvers, String> {
        let mut out = BTreeSet::new();
        for n in names {
            let n = n.as_ref();
            if let Some(&i) = self.by_name.get(n) {
                out.insert(self.people[i].name.clone());
            } else if let Some(m) = self.groups.get(n) {
                out.extend(m.iter().map(|&i| self.people[i].name.clone()));
            } else {
                return Err(n.to_string());
            }
        }
        Ok(Approvers { people: out })
    }
}

/// A set of people (a route's approvers, expanded from people and groups).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Approvers {
    people: BTreeSet<String>,
}

impl Approvers {
    /// Whether it names nobody.
    pub fn is_empty(&self) -> bool {
        self.people.is_empty()
    }

    /// Whether person `name` is one of them.
    pub fn contains(&self, name: &str) -> bool {
        self.people.contains(name)
    }

    /// Whether the identity `id` on `channel` is one of them, as `people` knows it.
    pub fn admits(&self, people: &People, channel: &str, id: &str) -> bool {
        people
            .identify(channel, id)
            .is_some_and(|p| self.people.contains(p.name()))
    }

    /// The people's names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.people.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(name: &str, ids: &[(&str, &str)], groups: &[&str]) -> PersonSpec {
        PersonSpec {
            name: name.into(),
            identities: ids.iter().map(|(c, i)| Identity::new(*c, *i)).collect(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            quiet: None,
        }
    }

    fn team() -> People {
        People::new(
            vec![
                person(
                    "alice",
                    &[("telegram", "111"), ("feishu", "ou_a")],
                    &["web"],
                ),
                person("bob", &[("telegram", "222"), ("slack", "U2")], &[]),
                person(
                    "chen",
                    &[("feishu", "ou_c"), ("operator", "chen-laptop")],
                    &[],
                ),
            ],
            vec![GroupSpec {
                name: "data".into(),
                members: vec!["bob".into(), "chen".into()],
            }],
        )
        .unwrap()
    }

    #[test]
    fn an_identity_names_its_person_on_every_channel() {
        let p = team();
        assert_eq!(p.name_of("telegram", "111"), Some("alice"));
        assert_eq!(p.name_of("feishu", "ou_a"), Some("alice"));
        assert_eq!(p.name_of("slack", "U2"), Some("bob"));
        assert_eq!(p.name_of("operator", "chen-laptop"), Some("chen"));
        // The same id on another channel is somebody else (or nobody).
        assert_eq!(p.name_of("feishu", "111"), None);
        assert_eq!(p.name_of("telegram", "999"), None);
        assert_eq!(
            p.person("alice")
                .unwrap()
                .ids_on("telegram")
                .collect::<Vec<_>>(),
            ["111"]
        );
    }

    #[test]
    fn groups_from_both_sides_expand_to_people() {
        let p = team();
        assert_eq!(p.groups().collect::<Vec<_>>(), ["data", "web"]);
        let a = p.expand(&["data"]).unwrap();
        assert_eq!(a.names().collect::<Vec<_>>(), ["bob", "chen"]);
        let a = p.expand(&["web", "bob"]).unwrap();
        assert_eq!(a.names().collect::<Vec<_>>(), ["alice", "bob"]);
        assert!(a.admits(&p, "feishu", "ou_a"));
        assert!(a.admits(&p, "telegram", "222"));
        assert!(!a.admits(&p, "feishu", "ou_c"));
        assert!(!a.admits(&p, "telegram", "999"));
        assert_eq!(p.expand(&["bob", "nobody"]).unwrap_err(), "nobody");
        assert_eq!(
            p.person("chen").unwrap().groups().collect::<Vec<_>>(),
            ["data"]
        );
        assert!(p.knows("web") && p.knows("chen") && !p.knows("x"));
    }

    #[test]
    fn bad_people_are_refused_with_their_place() {
        let e = People::new(
            vec![
                person("a", &[("telegram", "1")], &[]),
                person("b", &[("telegram", "1")], &[]),
            ],
            vec![],
        )
        .unwrap_err();
        assert_eq!(e.field, "people[1].telegram[0]");
        assert!(e.message.contains("already \"a\"'s"), "{e}");

        let e =
            People::new(vec![person("a", &[], &[]), person("a", &[], &[])], vec![]).unwrap_err();
        assert_eq!(e.field, "people[1].name");

        let e = People::new(
            vec![person("a", &[], &[])],
            vec![GroupSpec {
                name: "g".into(),
                members: vec!["zed".into()],
            }],
        )
        .unwrap_err();
        assert_eq!(e.field, "groups[0].members[0]");

        let e = People::new(vec![person("a", &[], &["a"])], vec![]).unwrap_err();
        assert!(e.message.contains("both a person and a group"), "{e}");

        let e = People::new(vec![person(" a", &[], &[])], vec![]).unwrap_err();
        assert_eq!(e.field, "people[0].name");
        let e = People::new(vec![person("a", &[("slack", " ")], &[])], vec![]).unwrap_err();
        assert_eq!(e.field, "people[0].slack[0]");
    }
}
