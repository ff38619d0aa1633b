"""The ``{% url %}`` tag, answered from review.urlcache where it gives the same string.

Installed as a template builtin (settings.TEMPLATES), after Django's own, so every template's
``{% url %}`` is this one. A name without a namespace whose arguments are all ``int`` goes to
``url_for``; anything else (a namespace, which depends on the current app; keyword arguments;
strings) is rendered by Django's node unchanged.
"""

from django import template
from django.template import Context, defaulttags
from django.template.base import Parser, Token
from django.urls import NoReverseMatch
from django.utils.html import conditional_escape

from review.urlcache import url_for

register = template.Library()


class CachedURLNode(defaulttags.URLNode):
    def render(self, context: Context) -> str:
        if self.kwargs:
            return str(super().render(context))
        view_name = self.view_name.resolve(context)
        args = [arg.resolve(context) for arg in self.args]
        if (
            not isinstance(view_name, str)
            or ":" in view_name
            or any(type(arg) is not int for arg in args)  # True is an int to Python only
        ):
            return str(super().render(context))
        try:
            url = url_for(view_name, *args)
        except NoReverseMatch:
            if self.asvar is None:
                raise
            url = ""
        if self.asvar:
            context[self.asvar] = url
            return ""
        return str(conditional_escape(url)) if context.autoescape else url


@register.tag
def url(parser: Parser, token: Token) -> CachedURLNode:
    node = defaulttags.url(parser, token)
    return CachedURLNode(node.view_name, node.args, node.kwargs, node.asvar)
