//! Requests whose method starts with `$/` are answered.
//!
//! tower-lsp-server drops the MethodNotFound answer of every unknown
//! method starting with `$/`, requests included. LSP lets a server ignore
//! such notifications, but a request must be answered (-32601), or the
//! client waits for it forever. [`AnswerDollarRequests`] wraps the service
//! and answers what it left unanswered; everything else passes unchanged.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower_lsp_server::jsonrpc::{Error, Request, Response};
use tower_service::Service;

/// The service `S`, with every `$/` request it leaves unanswered answered
/// MethodNotFound.
pub struct AnswerDollarRequests<S>(pub S);

impl<S> Service<Request> for AnswerDollarRequests<S>
where
    S: Service<Request, Response = Option<Response>>,
    S::Future: Send + 'static,
{
    type Response = Option<Response>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Option<Response>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let must_answer = request
            .method()
            .starts_with("$/")
            .then(|| request.id().cloned())
            .flatten();
        let answered = self.0.call(request);
        Box::pin(async move {
            Ok(match (answered.await?, must_answer) {
                (None, Some(id)) => Some(Response::from_error(id, Error::method_not_found())),
                (response, _) => response,
            })
        })
    }
}
