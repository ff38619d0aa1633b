"""Identity providers the SSO tests start on loopback: allauth's own OpenID Provider in a second
Django process (``oidc_idp``) and a pysaml2 SAML IdP (``saml_idp``). ``fixtures`` starts each
once per test session and drives their sign-in pages as a browser would."""
