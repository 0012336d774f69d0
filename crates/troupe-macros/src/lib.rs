//! `#[tool]`: an async function with doc comments becomes a typed tool of troupe.
//!
//! Use it through the facade, `troupe::tool` (also in `troupe::prelude`): the code it
//! writes names `::troupe::tools`. The attribute's documentation, with examples that run,
//! is on [`macro@tool`].

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, FnArg, Ident, ItemFn, Lit, LitStr, Meta, Pat, Token, Type};

/// Turns an async function into a tool an agent can call: used as `troupe::tool`, whose
/// page has the whole description and examples that run.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let settings = syn::parse_macro_input!(attr with Punctuated::<Meta, Token![,]>::parse_terminated);
    let function = syn::parse_macro_input!(item as ItemFn);
    expand(settings, function).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// The effects a tool may declare, as the attribute names them, and the variant of
/// `troupe::tools::Effect` each means.
const EFFECTS: [(&str, &str); 5] = [
    ("read_only", "ReadOnly"),
    ("write_state", "WriteState"),
    ("external", "ExternalSideEffect"),
    ("external_side_effect", "ExternalSideEffect"),
    ("destructive", "Destructive"),
];

const NO_EFFECT: &str =
    "declare the tool's effect: #[tool(read_only)], #[tool(write_state)], #[tool(external)] or #[tool(destructive)]";

/// What the attribute's arguments say.
struct Settings {
    effect: Ident,
    name: Option<LitStr>,
}

fn settings(metas: Punctuated<Meta, Token![,]>) -> syn::Result<Settings> {
    let mut effect = None;
    let mut name = None;
    for meta in metas {
        match &meta {
            Meta::Path(path) => {
                let word = path.get_ident().map(Ident::to_string).unwrap_or_default();
                let Some((_, variant)) = EFFECTS.iter().find(|(given, _)| *given == word) else {
                    return Err(syn::Error::new(path.span(), format!("unknown effect `{word}`; {NO_EFFECT}")));
                };
                if effect.replace(Ident::new(variant, path.span())).is_some() {
                    return Err(syn::Error::new(path.span(), "a tool declares one effect"));
                }
            }
            Meta::NameValue(pair) if pair.path.is_ident("name") => match &pair.value {
                Expr::Lit(ExprLit { lit: Lit::Str(text), .. }) => name = Some(text.clone()),
                other => return Err(syn::Error::new(other.span(), "`name` takes a string: name = \"geo.capital\"")),
            },
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    format!("unknown setting; {NO_EFFECT}, and optionally name = \"…\""),
                ));
            }
        }
    }
    let effect = effect.ok_or_else(|| syn::Error::new(Span::call_site(), NO_EFFECT))?;
    Ok(Settings { effect, name })
}

/// One parameter of the function.
struct Parameter {
    ident: Ident,
    ty: Type,
    docs: Vec<Attribute>,
    is_context: bool,
}

fn expand(metas: Punctuated<Meta, Token![,]>, mut function: ItemFn) -> syn::Result<Tokens> {
    let Settings { effect, name } = settings(metas)?;
    let sig = &function.sig;
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(sig.generics.span(), "a #[tool] function cannot be generic"));
    }
    let description = doc_text(&function.attrs);
    if description.is_empty() {
        return Err(syn::Error::new(
            sig.ident.span(),
            "a #[tool] function needs a doc comment: it is the description the model reads",
        ));
    }
    let mut parameters = Vec::new();
    for input in &mut function.sig.inputs {
        let FnArg::Typed(typed) = input else {
            return Err(syn::Error::new(input.span(), "a #[tool] function takes no `self`"));
        };
        let Pat::Ident(pattern) = &*typed.pat else {
            return Err(syn::Error::new(
                typed.pat.span(),
                "a #[tool] parameter is a plain name: it names the argument",
            ));
        };
        // Doc comments on parameters are the schema's; rustc takes none there.
        let (docs, rest): (Vec<Attribute>, Vec<Attribute>) =
            typed.attrs.drain(..).partition(|attr| attr.path().is_ident("doc"));
        typed.attrs = rest;
        parameters.push(Parameter {
            ident: pattern.ident.clone(),
            ty: (*typed.ty).clone(),
            docs,
            is_context: is_context(&typed.ty),
        });
    }

    let function_name = &function.sig.ident;
    let tool_name = name.unwrap_or_else(|| LitStr::new(&function_name.to_string(), function_name.span()));
    let unit = format_ident!("{}", pascal_case(&function_name.to_string()), span = function_name.span());
    let visibility = &function.vis;
    let fields = parameters.iter().filter(|p| !p.is_context).map(|Parameter { ident, ty, docs, .. }| {
        quote! { #(#docs)* #ident: #ty }
    });
    let context = if parameters.iter().any(|p| p.is_context) { quote!(ctx) } else { quote!(_ctx) };
    let takes = if parameters.iter().any(|p| !p.is_context) { quote!(arguments) } else { quote!(_arguments) };
    let arguments = parameters.iter().map(|p| {
        let ident = &p.ident;
        if p.is_context { quote!(ctx.clone()) } else { quote!(arguments.#ident) }
    });
    let call = if function.sig.asyncness.is_some() {
        quote!(#function_name(#(#arguments),*).await)
    } else {
        quote!(#function_name(#(#arguments),*))
    };
    let unit_doc = format!("The `{}` tool: [`{function_name}`] as a tool for an agent (`#[tool]`).", tool_name.value());

    Ok(quote! {
        #function

        #[doc = #unit_doc]
        #[derive(Clone, Copy, Debug, Default)]
        #visibility struct #unit;

        impl #unit {
            /// The tool, built once per process.
            fn typed() -> &'static ::troupe::tools::TypedTool {
                static TOOL: ::std::sync::OnceLock<::troupe::tools::TypedTool> = ::std::sync::OnceLock::new();
                TOOL.get_or_init(|| {
                    #[derive(::troupe::tools::__private::serde::Deserialize, ::troupe::tools::__private::schemars::JsonSchema)]
                    #[serde(crate = "::troupe::tools::__private::serde", deny_unknown_fields)]
                    #[schemars(crate = "::troupe::tools::__private::schemars")]
                    struct Arguments {
                        #(#fields,)*
                    }
                    ::troupe::tools::typed_tool(
                        #tool_name,
                        #description,
                        ::troupe::tools::Effect::#effect,
                        |#context: ::troupe::tools::ToolContext, #takes: Arguments| async move {
                            ::troupe::tools::IntoToolResult::into_tool_result(#call)
                        },
                    )
                })
            }
        }

        impl ::troupe::tools::Tool for #unit {
            fn declaration(&self) -> &::troupe::tools::ToolDeclaration {
                ::troupe::tools::Tool::declaration(Self::typed())
            }

            fn call<'a>(
                &'a self,
                ctx: &'a ::troupe::tools::ToolContext,
                args: ::troupe::tools::__private::serde_json::Value,
            ) -> ::troupe::tools::__private::BoxFuture<
                'a,
                ::std::result::Result<::troupe::tools::ToolOutput, ::troupe::tools::ToolError>,
            > {
                ::troupe::tools::Tool::call(Self::typed(), ctx, args)
            }
        }
    })
}

/// The text of `attrs`' doc comments: each line without the one space `///` leaves,
/// joined with newlines, trimmed.
fn doc_text(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            Meta::NameValue(pair) => match &pair.value {
                Expr::Lit(ExprLit { lit: Lit::Str(text), .. }) => Some(text.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').map(str::to_owned).unwrap_or(line))
        .collect();
    lines.join("\n").trim().to_owned()
}

/// Whether `ty` is the call's context (`ToolContext`, by any path).
fn is_context(ty: &Type) -> bool {
    matches!(ty, Type::Path(path) if path.path.segments.last().is_some_and(|s| s.ident == "ToolContext"))
}

/// `lookup_word` → `LookupWord`.
fn pascal_case(snake: &str) -> String {
    snake
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|first| first.to_uppercase().chain(chars).collect::<String>()).unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_pascal_case() {
        assert_eq!(pascal_case("lookup_word"), "LookupWord");
        assert_eq!(pascal_case("capital"), "Capital");
        assert_eq!(pascal_case("_private_tool"), "PrivateTool");
    }

    #[test]
    fn an_effect_is_required_and_known() {
        let none = settings(Punctuated::new()).err().map(|e| e.to_string());
        assert_eq!(none.as_deref(), Some(NO_EFFECT));
        let unknown: Punctuated<Meta, Token![,]> = syn::parse_quote!(harmless);
        let error = settings(unknown).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.starts_with("unknown effect `harmless`"), "{error}");
        let named: Punctuated<Meta, Token![,]> = syn::parse_quote!(external, name = "mail.send");
        let Ok(Settings { effect, name }) = settings(named) else { panic!("external with a name parses") };
        assert_eq!(effect, "ExternalSideEffect");
        assert_eq!(name.map(|n| n.value()).as_deref(), Some("mail.send"));
    }

    #[test]
    fn a_function_without_a_doc_comment_is_refused() {
        let function: ItemFn = syn::parse_quote!(
            async fn quiet() -> String {
                String::new()
            }
        );
        let error = expand(syn::parse_quote!(read_only), function).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("needs a doc comment"), "{error}");
    }
}
